import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A Python server of the tests (Tests/idp/) started on loopback over TLS: the real
/// authorization server (django-oauth-toolkit) or the fault-injecting provider.
///
/// The script prints one JSON line when it is ready (its port, issuer, CA file, …) and runs
/// until SIGTERM. `scripts/test` creates the venv it needs.
final class LoopbackServer: @unchecked Sendable {
    /// What the script said when it became ready.
    let info: [String: Any]
    let workdir: String
    private let process: Process
    private let log = SharedText()

    static let repository = Repository.root
    static let python = repository.appendingPathComponent(".venv/bin/python").path

    /// Starts `script` (in Tests/idp) with `arguments` (and `environment` added to the test's)
    /// and waits for its ready line.
    init(script: String, workdir: String, arguments: [String], environment: [String: String] = [:]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw TestFailure("\(Self.python) is missing: run scripts/test, which creates the venv with the test identity provider")
        }
        self.workdir = workdir
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = [Self.repository.appendingPathComponent("Tests/idp/\(script)").path, "--workdir", workdir] + arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        collect(errors.fileHandleForReading, into: log)
        try process.run()
        let line = Self.readLine(output.fileHandleForReading, timeout: .seconds(60))
        guard let line, let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            process.terminate()
            throw TestFailure("\(script) did not become ready; its log:\n\(log.text)")
        }
        info = object
    }

    var port: Int { info["port"] as? Int ?? 0 }
    var issuer: String { info["issuer"] as? String ?? "" }
    var caFile: String { info["ca_file"] as? String ?? "" }
    var endpoints: [String: String] { info["endpoints"] as? [String: String] ?? [:] }
    var logText: String { log.text }

    /// The file holding a confidential client's secret.
    func secretFile(client: String) -> String {
        workdir + "/\(client).secret"
    }

    /// Stops the server and waits until it has exited.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit {
        // A graceful stop, so the script also stops the gunicorn it started.
        stop()
    }

    /// Reads bytes up to the first newline, or gives up after `timeout`.
    private static func readLine(_ handle: FileHandle, timeout: Duration) -> String? {
        var bytes: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var descriptor = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
        while ContinuousClock.now < deadline {
            guard poll(&descriptor, 1, 100) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(handle.fileDescriptor, &byte, 1) == 1 else { return nil }
            if byte == 0x0A { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }
}

extension LoopbackServer {
    /// The real authorization server. Pass the same `workdir` and `port` to restart it after
    /// `stop()` with the same users, clients, keys and certificate.
    /// - Parameter authorizationResponseIss: Adds `iss` to authorization responses and
    ///   advertises it (RFC 9207).
    static func identityProvider(
        workdir: String,
        port: Int? = nil,
        accessTokenLifetime: Int = 3600,
        authorizationResponseIss: Bool = false
    ) throws -> LoopbackServer {
        var arguments = ["--access-token-lifetime", "\(accessTokenLifetime)"]
        if let port { arguments += ["--port", "\(port)"] }
        if authorizationResponseIss { arguments.append("--authorization-response-iss") }
        return try LoopbackServer(script: "launch.py", workdir: workdir, arguments: arguments)
    }

    /// The fault-injecting provider in `mode` (see Tests/idp/faulty.py).
    static func faulty(workdir: String, mode: String, delay: Double? = nil, expiresIn: Int? = nil) throws -> LoopbackServer {
        var arguments = ["--mode", mode]
        if let delay { arguments += ["--delay", "\(delay)"] }
        if let expiresIn { arguments += ["--expires-in", "\(expiresIn)"] }
        return try LoopbackServer(script: "faulty.py", workdir: workdir, arguments: arguments)
    }

    /// Request counts by path (faulty provider only).
    func stats() throws -> [String: Any] {
        let result = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--cacert", caFile, issuer + "/_stats"])
        return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    /// Switches the faulty provider's mode (and the delay of `slow` modes, and the `expires_in`
    /// of the tokens it issues from now on).
    func setMode(_ mode: String, delay: Double? = nil, expiresIn: Int? = nil) throws {
        var form = ["-d", "mode=\(mode)"]
        if let delay { form += ["-d", "delay=\(delay)"] }
        if let expiresIn { form += ["-d", "expires_in=\(expiresIn)"] }
        _ = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--cacert", caFile] + form + [issuer + "/_mode"])
    }

    /// How many token requests the faulty provider has answered.
    func tokenRequests() throws -> Int {
        (try stats()["requests"] as? [String: Any])?["POST /token"] as? Int ?? 0
    }
}

/// A provider file for the fault-injecting provider (Tests/idp/faulty.py) with short timeouts.
func faultyProviderFile(
    _ server: LoopbackServer,
    grants: String = #"["password"]"#,
    scopes: String = #"["openid"]"#,
    extra: String = ""
) -> String {
    #"""
    {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": \#(grants), "scopes": \#(scopes),
     "tls": {"ca_file": "\#(server.caFile)"}, "timeouts": {"connect_ms": 1000, "total_ms": 5000},
     "endpoints": {"device_authorization": "\#(server.issuer)/device"}\#(extra)}
    """#
}
