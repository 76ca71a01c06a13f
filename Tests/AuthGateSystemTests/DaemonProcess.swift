import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where the built executables are: `$AUTHGATE_BIN_DIR` (set by scripts/test), else this
/// checkout's `.build/debug`.
enum BuiltProducts {
    static let directory: URL = {
        if let explicit = ProcessInfo.processInfo.environment["AUTHGATE_BIN_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit)
        }
        return Repository.root.appendingPathComponent(".build/debug")
    }()

    /// The daemon: `authgated`, a link to `authgate` beside it as installed (scripts/lib.sh's
    /// link_programs makes it after a build; made here when a plain `swift build` did not).
    static let daemon: URL = {
        let link = directory.appendingPathComponent("authgated")
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: link.path)) != "authgate" {
            // Not a link to it: missing, or the separate daemon executable of older builds.
            try? FileManager.default.removeItem(at: link)
            try? FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "authgate")
        }
        return link
    }()
    static let cli = directory.appendingPathComponent("authgate")
}

/// A real `authgated` on a temporary socket with a temporary providers directory.
///
/// Its stderr (the log) is collected so tests can wait for "listening" and check that no
/// secret was ever logged.
final class DaemonProcess: Sendable {
    let scratch: ScratchDirectory
    let socketPath: String
    let providersDirectory: String
    private let process: Process
    private let log = SharedText()

    /// Starts the daemon with `providers` (file name → JSON) and waits until it listens.
    /// - Parameters:
    ///   - scratch: The directory of an earlier daemon, to start again on its state.
    ///   - environment: Added to the daemon's environment.
    ///   - launcher: A command that execs the daemon (its path and arguments follow), such as
    ///     `setpriv …` or a socket-activation launcher; the pid stays the daemon's.
    init(
        providers: [String: String],
        arguments: [String] = [],
        logLevel: String = "trace",
        waitUntilListening: Bool = true,
        scratch: ScratchDirectory? = nil,
        environment: [String: String] = [:],
        launcher: [String] = []
    ) throws {
        self.scratch = try scratch ?? ScratchDirectory()
        let scratch = self.scratch
        socketPath = scratch.path + "/s.sock"
        providersDirectory = scratch.path + "/providers.d"
        try FileManager.default.createDirectory(atPath: providersDirectory, withIntermediateDirectories: true)
        for (name, json) in providers {
            try Data(json.utf8).write(to: URL(fileURLWithPath: providersDirectory + "/" + name))
        }
        process = Process()
        // The tester's own keyring never holds a test's key: the file unless a test names a key store.
        let keyStore = arguments.contains("--key-store") ? [] : ["--key-store", "file"]
        let daemonArguments =
            [
                "--user", "--providers", providersDirectory, "--socket", socketPath,
                "--state-dir", scratch.path + "/state", "--log-level", logLevel,
            ] + keyStore + arguments
        if let program = launcher.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = Array(launcher.dropFirst()) + [BuiltProducts.daemon.path] + daemonArguments
        } else {
            process.executableURL = BuiltProducts.daemon
            process.arguments = daemonArguments
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let errorPipe = Pipe()
        process.standardError = errorPipe
        process.standardOutput = errorPipe
        collect(errorPipe.fileHandleForReading, into: log)
        try process.run()
        if waitUntilListening { try waitForLog("listening") }
    }

    /// Everything the daemon has logged so far.
    var logText: String { log.text }

    var isRunning: Bool { process.isRunning }

    /// The daemon's pid (a launcher execs it, so it is the same process).
    var pid: Int32 { process.processIdentifier }

    /// Waits until the log contains `text` (the daemon's own signal), failing after `timeout`.
    /// After the daemon exits, its last lines may still be in the pipe for a moment.
    func waitForLog(_ text: String, timeout: Duration = .seconds(30)) throws {
        try eventually(timeout: timeout, "authgated did not log \"\(text)\" in time; log:\n\(logText)") {
            if logText.contains(text) { return true }
            if log.isComplete {
                throw StopWaiting(reason: "authgated exited (\(process.terminationStatus)) before logging \"\(text)\"; log:\n\(logText)")
            }
            return false
        }
    }

    /// Waits for the process to exit (its log read to the end) and returns its status.
    func waitForExit(timeout: Duration = .seconds(30)) throws -> Int32 {
        try AuthGateTestSupport.waitForExit(process, outputs: [log], timeout: timeout, "authgated")
    }

    /// The daemon's state directory (persistent sessions, the storage key).
    var stateDirectory: String { scratch.path + "/state" }

    /// Sends `signal` to the daemon.
    func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// A new connection to the daemon's socket.
    func connect() throws -> RPCConnection {
        try RPCConnection(path: socketPath)
    }

    /// Runs the `authgate` CLI against this daemon.
    func cli(_ arguments: [String], stdin: String? = nil, prefix: [String] = []) throws -> ProcessOutput {
        try run(BuiltProducts.cli, arguments, stdin: stdin, environment: ["AUTHGATE_SOCKET": socketPath], prefix: prefix)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// Sends one raw line and returns the parsed reply object.
func exchange(_ connection: RPCConnection, _ line: String) throws -> [String: Any] {
    try connection.send(Array((line + "\n").utf8))
    return try readReply(connection)
}

/// Reads one reply line and parses it as a JSON object.
func readReply(_ connection: RPCConnection) throws -> [String: Any] {
    guard let reply = try connection.receiveLine() else { throw TestFailure("the daemon closed the connection") }
    guard let object = try JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any] else {
        throw TestFailure("reply is not a JSON object: \(String(decoding: reply, as: UTF8.self))")
    }
    return object
}

extension Dictionary where Key == String, Value == Any {
    /// `error.data.reason` of a reply.
    var errorReason: String? { ((self["error"] as? [String: Any])?["data"] as? [String: Any])?["reason"] as? String }
    var errorCode: Int? { (self["error"] as? [String: Any])?["code"] as? Int }
    var errorMessage: String? { ((self["error"] as? [String: Any])?["data"] as? [String: Any])?["message"] as? String }
    var result: Any? { self["result"] }
}

/// Provider files used across the tests.
enum Providers {
    /// The request line that signs the mock provider's demo user in (`Providers.mock`).
    static let mockLogin = #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#

    static let mock = #"""
        {
          "type": "mock",
          "users": [
            { "username": "demo", "password": "demo-password-1" },
            { "username": "alice", "password": "wonderland-42" }
          ],
          "access_token_lifetime_seconds": 3600
        }
        """#

    /// A mock whose every request takes `milliseconds`.
    static func slowMock(_ milliseconds: Int) -> String {
        #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "latency_ms": [\#(milliseconds), \#(milliseconds)]}"#
    }

    /// A mock whose access tokens live `seconds`.
    /// Mock tokens of 3 s, refreshed a second or so before they expire.
    static let quicklyRefreshedMock = #"""
        {"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}],
         "access_token_lifetime_seconds": 3, "refresh": {"before_expiry_seconds": 1}}
        """#

    static func shortLivedMock(_ seconds: Int) -> String {
        #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": \#(seconds)}"#
    }

    /// An OpenID provider nobody answers for: port 1 on loopback refuses connections.
    static let oidc = #"""
        {"type": "oidc", "issuer": "https://127.0.0.1:1/sso", "client_id": "authgate", "grants": ["password", "device_code"], "scopes": ["openid"]}
        """#

    static let broken = #"{"type": "mock", "latency": [1, 2]}"#
}

extension DaemonProcess {
    /// Signs `username` in to `provider` with the CLI (the password grant); by default the mock
    /// provider's demo user. `prefix` runs the CLI through another program (e.g. as another user).
    func signIn(
        _ provider: String = "mock",
        username: String = "demo",
        password: String = "demo-password-1",
        prefix: [String] = []
    ) throws {
        let login = try cli(["login", provider, "--username", username, "--password-stdin"], stdin: password + "\n", prefix: prefix)
        #expect(login.status == 0, "\(login.stderr)")
    }
}
