import AuthGateRPC
import AuthGateTestSupport
import Crypto
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Helpers of the interactive sign-in tests: the user played by Tests/idp/play_user.py, the
/// CLI running in the background or under a pseudo-terminal, the loopback redirect hit by hand.
enum Interactive {
    static let playUser = LoopbackServer.repository.appendingPathComponent("Tests/idp/play_user.py").path

    /// Runs play_user.py and returns its JSON line; fails the test with its message otherwise.
    static func play(_ arguments: [String]) throws -> [String: Any] {
        let result = try run(URL(fileURLWithPath: LoopbackServer.python), [playUser] + arguments)
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else {
            throw TestFailure("play_user.py \(arguments.first ?? "") failed (\(result.status)): \(result.stderr)")
        }
        return object
    }

    /// Approves (or denies) a device code as alice.
    static func device(_ server: LoopbackServer, verificationURIComplete: String, deny: Bool = false) throws -> [String: Any] {
        try play(
            [
                "device", "--ca-file", server.caFile, "--verification-uri", verificationURIComplete,
                "--username", "alice", "--password", "alice-password-1",
            ] + (deny ? ["--deny"] : [])
        )
    }

    /// Signs in as alice on the authorization page; follows the redirect unless `follow` is false.
    static func browser(_ server: LoopbackServer, authorizationURL: String, deny: Bool = false, follow: Bool = true) throws -> [String: Any] {
        try play(
            [
                "browser", "--ca-file", server.caFile, "--authorization-url", authorizationURL,
                "--username", "alice", "--password", "alice-password-1",
            ] + (deny ? ["--deny"] : []) + (follow ? [] : ["--no-follow"])
        )
    }

    /// GET on a plain http loopback URL: (curl's exit status, HTTP status, body).
    static func get(_ url: String) throws -> (exit: Int32, status: Int, body: String) {
        let result = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--noproxy", "*", "-m", "10", "-w", "\n%{http_code}", url])
        var lines = result.stdout.components(separatedBy: "\n")
        let status = Int(lines.popLast() ?? "") ?? 0
        return (result.status, status, lines.joined(separator: "\n"))
    }

    /// `url` with its query parameter `name` replaced (or removed when `value` is nil).
    static func replacing(_ name: String, with value: String?, in url: String) -> String {
        var components = URLComponents(string: url)!
        var items = (components.queryItems ?? []).filter { $0.name != name }
        if let value { items.append(URLQueryItem(name: name, value: value)) }
        components.queryItems = items
        return components.string!
    }

    static func query(_ name: String, of url: String) -> String? {
        URLComponents(string: url)?.queryItems?.first { $0.name == name }?.value
    }

    /// A provider file for the test server's `client`.
    static func provider(_ server: LoopbackServer, client: String, grants: [String], extra: String = "") -> String {
        #"""
        {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "\#(client)", "grants": \#(grants),
         "scopes": ["openid", "profile", "email"], "tls": {"ca_file": "\#(server.caFile)"},
         "endpoints": {"revocation": "\#(server.endpoints["revocation"] ?? "")",
                       "device_authorization": "\#(server.endpoints["device_authorization"] ?? "")"}\#(extra)}
        """#
    }

    /// Every 43-character base64url word in `text` whose SHA-256 is `challenge`: a PKCE verifier
    /// that leaked (RFC 7636 §4.2). The daemon's verifiers are exactly 43 characters.
    static func verifiers(in text: String, matching challenge: String) -> [String] {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var words: [String] = []
        var current = ""
        for character in text + " " {
            if alphabet.contains(character) {
                current.append(character)
                continue
            }
            if current.count >= 43 {
                // Any 43-character window of a longer word, too.
                let characters = Array(current)
                for start in 0...(characters.count - 43) { words.append(String(characters[start..<start + 43])) }
            }
            current = ""
        }
        return words.filter { word in
            let digest = Data(SHA256.hash(data: Data(word.utf8))).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            return digest == challenge
        }
    }
}

extension Interactive {
    /// Plays the user of a browser sign-in that `cli` (`login --browser --no-browser`, `provider
    /// test`…) runs in the background, at a provider that redirects at once (idpyoidc's NoAuthn,
    /// the faulty provider): a GET of the authorization URL it prints, and of the redirect.
    /// - Returns: The authorization URL.
    @discardableResult
    static func approveInBrowser(_ cli: BackgroundProcess, _ server: LoopbackServer) throws -> String {
        try cli.waitForOutput("Ctrl-C cancels it")
        let url = try #require(cli.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("https://") })
        let authorize = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--cacert", server.caFile, "-o", "/dev/null", "-w", "%{redirect_url}", url])
        let redirect = authorize.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(redirect.hasPrefix("http://127.0.0.1:"), "\(authorize)")
        #expect(try get(redirect).status == 200)
        return url
    }
}

/// A process running in the background, its output collected as it comes.
final class BackgroundProcess: Sendable {
    private let process: Process
    private let stdoutText = SharedText()
    private let stderrText = SharedText()

    init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            .filter { $0.key != "DISPLAY" && $0.key != "WAYLAND_DISPLAY" }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        collect(output.fileHandleForReading, into: stdoutText)
        collect(errors.fileHandleForReading, into: stderrText)
        try process.run()
    }

    var stdout: String { stdoutText.text }
    var stderr: String { stderrText.text }
    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Waits until stdout or stderr contains `text`.
    func waitForOutput(_ text: String, timeout: Duration = .seconds(30)) throws {
        try eventually(timeout: timeout, "no \"\(text)\" in the output; stdout:\n\(stdout)\nstderr:\n\(stderr)") {
            if (stdout + stderr).contains(text) { return true }
            if stdoutText.isComplete && stderrText.isComplete {
                throw StopWaiting(reason: "the process ended without \"\(text)\"; stdout:\n\(stdout)\nstderr:\n\(stderr)")
            }
            return false
        }
    }

    /// Waits for the process to exit and its output to reach the end; returns its status.
    func waitForExit(timeout: Duration = .seconds(60)) throws -> Int32 {
        try AuthGateTestSupport.waitForExit(process, outputs: [stdoutText, stderrText], timeout: timeout, "the process")
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

extension DaemonProcess {
    /// The CLI against this daemon, in the background, with no display (so no browser).
    func backgroundCLI(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(BuiltProducts.cli, arguments, environment: ["AUTHGATE_SOCKET": socketPath])
    }

    /// The CLI under a pseudo-terminal: waits for `text` in its output, types Ctrl-C, and
    /// returns what it printed (stdout and stderr together, as a terminal shows them) and its
    /// exit status.
    func cliInterruptedOnTerminal(_ arguments: [String], after text: String) throws -> (status: Int32, output: String) {
        let shown = try OnTerminal.run(
            [BuiltProducts.cli.path] + arguments,
            steps: [.interrupt(after: text)],
            environment: ["AUTHGATE_SOCKET": socketPath, "DISPLAY": "", "WAYLAND_DISPLAY": ""]
        )
        guard shown.done == 1 else { throw TestFailure("\"\(text)\" never appeared; output:\n\(shown.output)") }
        return (Int32(shown.status), shown.output)
    }
}

/// A command run under a pseudo-terminal (its controlling terminal, as a person's shell gives
/// it) with the person played by Tests/idp/on_terminal.py: one driver for every test of what
/// the CLI does on a terminal.
enum OnTerminal {
    static let driver = LoopbackServer.repository.appendingPathComponent("Tests/idp/on_terminal.py").path

    /// What the person does, in order, each once its text has shown.
    enum Step {
        /// Types `line` and Return once `prompt` shows in the last line.
        case type(_ line: String, after: String)
        /// Types Ctrl-C once `text` shows.
        case interrupt(after: String)
        /// Closes the terminal once `text` shows, as a dropped ssh connection does (the last step).
        case hangUp(after: String)
        /// Approves, as alice at `idp`, the device code whose verification URI (with the user
        /// code) is group 1 of the first match of `pattern`.
        case approveDeviceCode(pattern: String, idp: LoopbackServer)

        var json: [String: Any] {
            switch self {
            case .type(let line, let prompt): ["after": prompt, "type": line]
            case .interrupt(let text): ["after": text, "interrupt": true]
            case .hangUp(let text): ["after": text, "hang_up": true]
            case .approveDeviceCode(let pattern, let idp):
                [
                    "after_pattern": pattern,
                    "approve_device": [
                        "python": LoopbackServer.python, "play_user": Interactive.playUser, "ca_file": idp.caFile, "username": "alice",
                        "password": "alice-password-1",
                    ],
                ]
            }
        }
    }

    /// What the terminal showed (stdout and stderr together, CR LF line ends), the command's
    /// exit status, how many steps were done and what each approval printed.
    struct Shown {
        var status: Int
        var output: String
        var done: Int
        var approvals: [String]
    }

    /// Runs `command` on a terminal of its own, doing `steps`; it is killed after 90 s.
    static func run(_ command: [String], steps: [Step], environment: [String: String]) throws -> Shown {
        let plan = String(decoding: try JSONSerialization.data(withJSONObject: steps.map(\.json)), as: UTF8.self)
        let result = try AuthGateTestSupport.run(URL(fileURLWithPath: LoopbackServer.python), [driver, plan] + command, environment: environment)
        guard let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let status = object["status"] as? Int, let output = object["output"] as? String, let done = object["done"] as? Int
        else {
            throw TestFailure("on_terminal.py failed: \(result.stderr)")
        }
        return Shown(status: status, output: output, done: done, approvals: object["approvals"] as? [String] ?? [])
    }
}

/// A JSON-RPC call with a JSON object as params, answered as a parsed object.
///
/// `login.complete` waits 30 s at most unless the params say otherwise, so that a test of a
/// broken build fails in seconds instead of waiting out a flow's 10-minute lifetime.
func call(_ connection: RPCConnection, _ method: String, _ params: [String: Any]) throws -> [String: Any] {
    var params = params
    if method == "login.complete", params["timeout_seconds"] == nil { params["timeout_seconds"] = 30 }
    let request: [String: Any] = ["jsonrpc": "2.0", "id": 1, "method": method, "params": params]
    let line = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
    return try exchange(connection, line)
}

extension Dictionary where Key == String, Value == Any {
    /// The result as an object.
    var object: [String: Any] { self["result"] as? [String: Any] ?? [:] }
}
