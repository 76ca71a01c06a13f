import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `token.watch` and `authgate sink`, through the real daemon with short-lived mock tokens.
@Suite("Token watches and sinks", .serialized)
struct TokenWatchTests {
    /// Mock tokens of 3 s, refreshed a second or so before they expire.
    static let shortMock = #"""
        {"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}],
         "access_token_lifetime_seconds": 3, "refresh": {"before_expiry_seconds": 1}}
        """#

    /// A watcher in a process of its own (so that a test cannot hang on a read): sends
    /// token.watch and prints each line it receives until it has seen what `until` says
    /// (`changes:N`: N token.changed; `ended-then-changed`: a token.changed after a
    /// session.ended), or `timeout` seconds have passed. Returns once the watch is answered.
    private static func startWatcher(_ daemon: DaemonProcess, until: String, timeout: Double = 20, prefix: [String] = []) throws -> Watcher {
        let script = """
            import json, socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"token.watch","params":{"provider":"mock"}}\\n')
            s.settimeout(0.2); buffer = b""; end = time.time() + float(sys.argv[2]); until = sys.argv[3]
            changes, ended, done = 0, False, False
            while not done and time.time() < end:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    continue
                if not chunk: break
                buffer += chunk
                while b"\\n" in buffer:
                    line, buffer = buffer.split(b"\\n", 1)
                    print(line.decode(), flush=True)
                    method = json.loads(line).get("method")
                    changes += method == "token.changed"
                    if until == "ended-then-changed":
                        done = done or (ended and method == "token.changed")
                        ended = ended or method == "session.ended"
                    else:
                        done = done or changes >= int(until.split(":")[1])
            """
        let process = Process()
        let command = prefix + ["/usr/bin/python3", "-c", script, daemon.socketPath, "\(timeout)", until]
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var answer = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { break }
            answer.append(byte)
        }
        return Watcher(process: process, output: output, answer: answer)
    }

    struct Watcher {
        var process: Process
        var output: Pipe
        /// The watch's answer line.
        var answer: Data
    }

    /// Every line the watcher printed, the answer first, once it has exited.
    private static func lines(_ watcher: Watcher) -> [[String: Any]] {
        let rest = watcher.output.fileHandleForReading.readDataToEndOfFile()
        watcher.process.waitUntilExit()
        return ([watcher.answer] + String(decoding: rest, as: UTF8.self).split(separator: "\n").map { Data($0.utf8) })
            .map { (try? JSONSerialization.jsonObject(with: $0) as? [String: Any]) ?? [:] }
    }

    @Test("token.watch: the token at once, token.changed on each refresh, session.ended on logout, token.changed on a new sign-in")
    func notifications() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], logLevel: "info")
        try daemon.signIn()
        let watcher = try Self.startWatcher(daemon, until: "ended-then-changed")
        // At least one refresh of the watched session before it is signed out.
        let watched = try #require((try? JSONSerialization.jsonObject(with: watcher.answer) as? [String: Any])?["result"] as? [String: Any])
        try eventually(timeout: .seconds(10)) {
            try daemon.cli(["token", "mock", "--min-valid", "0"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                != watched["access_token"] as? String
        }
        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        try daemon.signIn()
        let lines = Self.lines(watcher)
        let first = try #require(lines.first?["result"] as? [String: Any], "\(lines)")
        let methods = lines.dropFirst().compactMap { $0["method"] as? String }
        let changes = lines.compactMap { ($0["params"] as? [String: Any]).flatMap { $0["access_token"] as? String } }
        #expect(methods.contains("token.changed") && methods.contains("session.ended"), "\(methods)")
        #expect(methods.last == "token.changed", "the new sign-in: \(methods)")
        #expect(!changes.contains(first["access_token"] as? String ?? "-"), "each change is a new token")
        let ended = lines.first { $0["method"] as? String == "session.ended" }?["params"] as? [String: Any]
        #expect(ended?["reason"] as? String == "logged_out" && ended?["provider"] as? String == "mock", "\(ended ?? [:])")
        // Between the refreshes the connection is quiet longer than nothing: never closed as idle.
        #expect(!daemon.logText.contains("the connection was idle"))
    }

    @Test(
        "two uids watching: each sees only its own session's notifications",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))
    )
    func watchersSeeOnlyTheirOwn() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], arguments: ["--socket-group", "nogroup"], logLevel: "info")
        chmod(daemon.scratch.path, 0o755)
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        try daemon.signIn()
        try daemon.signIn(prefix: asNobody)
        let rootWatcher = try Self.startWatcher(daemon, until: "changes:2")
        let nobodyWatcher = try Self.startWatcher(daemon, until: "changes:2", prefix: asNobody)
        let rootToken = try daemon.cli(["token", "mock", "--min-valid", "0"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let root = Self.lines(rootWatcher)
        let nobody = Self.lines(nobodyWatcher)
        let rootTokens = Set(root.compactMap { (($0["result"] ?? $0["params"]) as? [String: Any])?["access_token"] as? String })
        let nobodyTokens = Set(nobody.compactMap { (($0["result"] ?? $0["params"]) as? [String: Any])?["access_token"] as? String })
        #expect(rootTokens.count >= 2 && nobodyTokens.count >= 2, "both saw refreshes: \(rootTokens.count), \(nobodyTokens.count)")
        #expect(rootTokens.isDisjoint(with: nobodyTokens))
        #expect(!nobodyTokens.contains(rootToken))
    }

    @Test(
        "a reload that drops a uid from access signs its session out (revoked, no more refreshes) and ends its watch with access_revoked; the admitted uid keeps its own",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))
    )
    func narrowedAccessEndsSessionsAndWatches() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], arguments: ["--socket-group", "nogroup"], logLevel: "info")
        chmod(daemon.scratch.path, 0o755)
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        try daemon.signIn()
        try daemon.signIn(prefix: asNobody)
        let rootWatcher = try Self.startWatcher(daemon, until: "changes:1000", timeout: 4)
        let nobodyWatcher = try Self.startWatcher(daemon, until: "changes:1000", timeout: 30, prefix: asNobody)
        let narrowed = Self.shortMock.replacingOccurrences(of: #"{"type": "mock","#, with: #"{"type": "mock", "access": {"users": ["root"]},"#)
        #expect(narrowed != Self.shortMock)
        try Data(narrowed.utf8).write(to: URL(fileURLWithPath: daemon.providersDirectory + "/mock.json"))
        let reloaded = ContinuousClock.now
        #expect(try daemon.cli(["reload"]).status == 0)

        let nobody = Self.lines(nobodyWatcher)
        #expect(ContinuousClock.now - reloaded < .seconds(10), "the daemon closed the watch; it did not time out")
        let last = nobody.last { !$0.isEmpty }
        let ended = last?["params"] as? [String: Any]
        #expect(last?["method"] as? String == "session.ended" && ended?["reason"] as? String == "access_revoked", "\(nobody.map { $0["method"] ?? "answer" })")
        // Its session is gone (no refresh goes on), root's stays and keeps refreshing.
        let sessions = try daemon.cli(["status", "--all", "--json"]).stdout
        let uids = ((try? JSONSerialization.jsonObject(with: Data(sessions.utf8))) as? [[String: Any]] ?? []).compactMap { $0["uid"] as? Int }
        #expect(uids == [0], "\(sessions)")
        #expect(try daemon.cli(["token", "mock"], prefix: asNobody).status != 0)
        let root = Self.lines(rootWatcher)
        // (A changed mock file is a new in-memory provider, which cannot refresh the old session's
        // tokens: root's watch may see login_required, never access_revoked.)
        #expect(!root.contains { ($0["params"] as? [String: Any])?["reason"] as? String == "access_revoked" })
        #expect(daemon.logText.contains("signed out: the provider's access no longer admits the session's user"))
    }

    @Test(
        "token.watch with wait_for_sign_in answers the sign-in's token instead of login_required, past the idle deadline, then notifies as usual; token refuses the member"
    )
    func watchWaitsForTheSignIn() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], arguments: ["--idle-timeout", "1"], logLevel: "info")
        let connection = try daemon.connect()
        let refused = try exchange(connection, #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","wait_for_sign_in":true}}"#)
        #expect(refused.errorReason == "invalid_params" && refused.errorMessage?.contains("for token.watch only") == true, "\(refused)")

        // A watcher that prints each line, for at most 20 s; it says when its request is sent.
        let script = """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"token.watch","params":{"provider":"mock","wait_for_sign_in":true}}\\n')
            print("sent", flush=True)
            s.settimeout(20); buffer = b""
            while buffer.count(b"\\n") < 2:
                chunk = s.recv(65536)
                if not chunk: break
                buffer += chunk
            sys.stdout.write(buffer.decode()); sys.stdout.flush()
            """
        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        watcher.arguments = ["-c", script, daemon.socketPath]
        let output = Pipe()
        watcher.standardOutput = output
        try watcher.run()
        defer {
            kill(watcher.processIdentifier, SIGKILL)
            watcher.waitUntilExit()
        }
        #expect(output.fileHandleForReading.readData(ofLength: 5) == Data("sent\n".utf8))
        // Longer than the 1 s idle deadline: a connection opened after the watch is closed as
        // idle; the waiting request keeps its own.
        let later = try daemon.connect()
        _ = try exchange(later, #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock","wait_for_sign_in":true}}"#)
        #expect(try later.receiveLine() == nil, "closed as idle")
        try daemon.signIn()
        let lines = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
            .map { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) ?? [:] }
        try #require(lines.count == 2, "\(lines)")
        let answered = (lines[0]["result"] as? [String: Any])?["access_token"] as? String
        #expect(answered?.hasPrefix("mock_at_") == true, "the answer is the sign-in's token: \(lines[0])")
        #expect(lines[1]["method"] as? String == "token.changed", "then the next refresh: \(lines[1])")
        #expect((lines[1]["params"] as? [String: Any])?["access_token"] as? String != answered)
    }

    @Test("a refused token.watch leaves an ordinary connection, closed when idle")
    func refusedWatchIsNotAWatch() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], arguments: ["--idle-timeout", "2"], logLevel: "info")
        let connection = try daemon.connect()
        let refused = try exchange(connection, #"{"jsonrpc":"2.0","id":1,"method":"token.watch","params":{"provider":"mock"}}"#)
        #expect(refused.errorReason == "login_required")
        let asked = ContinuousClock.now
        #expect(try connection.receiveLine() == nil, "closed by the daemon")
        #expect(ContinuousClock.now - asked < .seconds(8), "by the 2 s idle deadline")
    }

    // MARK: authgate sink

    @Test(
        "authgate sink: the file holds the current token (mode as asked), rewritten on refresh with --on-change each time, never partial; removed on logout, back on sign-in, survives a daemon restart"
    )
    func sinkFollowsTheSession() throws {
        var daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], logLevel: "info")
        let scratch = daemon.scratch
        try daemon.signIn()
        let file = scratch.path + "/out/token"
        let count = scratch.path + "/changes"
        try FileManager.default.createDirectory(atPath: scratch.path + "/out", withIntermediateDirectories: false)
        let sink = Process()
        sink.executableURL = BuiltProducts.cli
        sink.arguments = ["sink", "mock", "--file", file, "--mode", "0440", "--on-change", "/bin/sh", "-c", "cat \(file) >> \(count)"]
        sink.environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": "/usr/bin:/bin"]
        let errors = Pipe()
        let said = SharedText()
        sink.standardError = errors
        collect(errors.fileHandleForReading, into: said)
        try sink.run()
        defer {
            kill(sink.processIdentifier, SIGKILL)
            sink.waitUntilExit()
        }
        try eventually("the sink wrote no file") { FileManager.default.fileExists(atPath: file) }
        let permissions = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(permissions == 0o440)
        // A reader in a tight loop for 4 s (a refresh or two): always a whole token line.
        let reader = try run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c",
                """
                import sys, time
                seen, bad, end = set(), 0, time.time() + 4
                while time.time() < end:
                    try:
                        text = open(sys.argv[1]).read()
                    except FileNotFoundError:
                        bad += 1; continue
                    if not (text.startswith("mock_at_") and text.endswith("\\n") and len(text) > 20): bad += 1
                    seen.add(text)
                print(len(seen), bad)
                """, file,
            ]
        )
        let figures = reader.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(figures.count == 2 && figures[0] >= 2 && figures[1] == 0, "tokens seen, bad reads: \(reader.stdout)\(reader.stderr)")
        // The file follows the daemon: it holds the token the daemon hands out. A token asked
        // for just before a refresh may never be written (the next one is), so each try asks
        // again, and reads the file before and after the answer.
        try eventually("the file never held the daemon's current token") {
            let before = try? String(contentsOfFile: file, encoding: .utf8)
            let current = try daemon.cli(["token", "mock", "--min-valid", "0"]).stdout
            return current.hasPrefix("mock_at_") && (before == current || (try? String(contentsOfFile: file, encoding: .utf8)) == current)
        }
        // --on-change ran once per change: after each write, and never twice for one token.
        let written = ((try? String(contentsOfFile: count, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(written.count >= figures[0] && Set(written).count == written.count, "\(written.count) runs, \(Set(written).count) tokens")

        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        try eventually("the file stayed after the logout") { !FileManager.default.fileExists(atPath: file) }
        try daemon.signIn()
        try eventually("no file after the new sign-in") { FileManager.default.fileExists(atPath: file) }

        // A restart: the mock's sessions are in memory, so the sink waits for a sign-in, then
        // writes again through a new connection.
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], logLevel: "info", scratch: scratch)
        try eventually(timeout: .seconds(15), "the file stayed after the restart") { !FileManager.default.fileExists(atPath: file) }
        // The log says why the file went, and the sink waits on the daemon for the sign-in.
        try eventually("the sink did not say why it removed the file: \(said.text)") {
            said.text.split(separator: "\n").contains { $0.hasPrefix("authgate sink: removed \(file): ") && $0.contains("[login_required]") }
        }
        #expect(said.text.contains("authgated closed the connection (stopped or restarting); reconnecting."), "\(said.text)")
        try daemon.signIn()
        try eventually(timeout: .seconds(5), "no token in the file after the restart's sign-in") {
            (try? String(contentsOfFile: file, encoding: .utf8))?.hasPrefix("mock_at_") == true
        }
        #expect(!said.text.contains("mock_at_"), "no token on stderr")
    }

    @Test("authgate sink --once writes and exits; an unknown provider exits non-zero with a sentence")
    func sinkOnceAndRefusal() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let file = daemon.scratch.path + "/header"
        let once = try daemon.cli(["sink", "mock", "--file", file, "--format", "header", "--once"])
        #expect(once.status == 0, "\(once.stderr)")
        let token = try daemon.cli(["token", "mock"]).stdout
        #expect((try? String(contentsOfFile: file, encoding: .utf8)) == "Authorization: Bearer \(token)")
        let unknown = try daemon.cli(["sink", "nope", "--file", file + "2"])
        #expect(unknown.status == 6 && unknown.stderr.contains("[unknown_provider]"), "\(unknown)")
        #expect(!FileManager.default.fileExists(atPath: file + "2"))
    }
}
