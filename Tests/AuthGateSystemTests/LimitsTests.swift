import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What one uid may hold or start at once, and what a connection may cost, so that one caller
/// cannot starve the others: connections, deadlines, sessions, sign-in attempts, provider
/// requests, finished flows.
@Suite("Limits: connections, deadlines, sessions, sign-ins, provider requests, flows", .serialized)
struct LimitsTests {
    // MARK: Connections

    static let canSwitchUsers =
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    /// Holds `count` connections as another uid (a blank line each, so the first-byte deadline
    /// does not close them), then tries one more and prints its answer; holds them until stdin closes.
    private static func holdConnections(_ daemon: DaemonProcess, as prefix: [String], count: Int) throws -> (Process, Pipe, FileHandle) {
        let script = """
            import socket, sys
            held = []
            for _ in range(\(count)):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"\\n"); held.append(s)
            extra = socket.socket(socket.AF_UNIX); extra.connect(sys.argv[1])
            print(extra.makefile().readline().strip(), flush=True)
            sys.stdin.read()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: prefix[0])
        process.arguments = Array(prefix.dropFirst()) + ["/usr/bin/python3", "-c", script, daemon.socketPath]
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        return (process, input, output.fileHandleForReading)
    }

    @Test(
        "one uid holding its share of connections is refused more; other uids and root are still served; refusals logged once per interval",
        .enabled(if: canSwitchUsers, "needs root, setpriv and /usr/bin/python3 to act as other uids")
    )
    func connectionShare() throws {
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.mock],
            arguments: ["--max-connections", "8", "--socket-group", "nogroup"],
            logLevel: "info"
        )
        chmod(daemon.scratch.path, 0o755)
        let asDaemonUser = ["/usr/bin/setpriv", "--reuid=1", "--regid=65534", "--clear-groups", "--"]
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        // A quarter of 8: uid 1 holds 2, and its third is refused with the share's sentence.
        let (holder, input, output) = try Self.holdConnections(daemon, as: asDaemonUser, count: 2)
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        var line = Data()
        while true {
            let byte = output.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { break }
            line.append(byte)
        }
        let refusal = String(decoding: line, as: UTF8.self)
        #expect(refusal.contains("rate_limited") && refusal.contains("connections of one user"), "\(refusal)")
        // Another uid, and root, are served meanwhile.
        let nobody = try daemon.cli(["providers"], prefix: asNobody)
        #expect(nobody.status == 0 && nobody.stdout.contains("mock"), "\(nobody.stderr)")
        #expect(try exchange(try daemon.connect(), #"{"jsonrpc":"2.0","id":1,"method":"providers.list"}"#).result != nil)
        // More refusals within the interval are one summary line, not one each.
        for _ in 0..<20 { _ = try daemon.cli(["providers"], prefix: asDaemonUser) }
        try eventually { daemon.logText.components(separatedBy: "connection refused: too many connections").count - 1 == 1 }
    }

    @Test(
        "a daemon that administers nobody (--no-admin, as the Kubernetes node agent) holds root's callers to a share like anyone's",
        .enabled(if: canSwitchUsers, "needs root, setpriv and /usr/bin/python3")
    )
    func rootSharesWhereNobodyAdministers() throws {
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.mock],
            arguments: ["--max-connections", "8", "--no-admin", "--socket-group", "nogroup"],
            logLevel: "info"
        )
        chmod(daemon.scratch.path, 0o755)
        // Another uid's session: root's daemon.info counts only root's own where it is no admin.
        try daemon.signIn(prefix: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        let info = try daemon.cli(["info", "--json"])
        let sessions = (try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])?["sessions"] as? Int
        #expect(sessions == 0, "\(info.stdout)")
        // Root (setpriv keeping uid 0): a quarter of 8 held, the third refused.
        let (holder, input, output) = try Self.holdConnections(daemon, as: ["/usr/bin/setpriv", "--reuid=0", "--"], count: 2)
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        var line = Data()
        while true {
            let byte = output.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { break }
            line.append(byte)
        }
        let refusal = String(decoding: line, as: UTF8.self)
        #expect(refusal.contains("rate_limited") && refusal.contains("connections of one user"), "\(refusal)")
    }

    @Test("a connection that sends no byte is closed after the first-byte deadline (2 s)")
    func firstByteDeadline() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let silent = try daemon.connect()
        let opened = ContinuousClock.now
        #expect(try silent.receiveLine() == nil, "closed by the daemon")
        let waited = ContinuousClock.now - opened
        #expect(waited >= .seconds(1.5) && waited < .seconds(10), "\(waited)")
        try daemon.waitForLog("nothing arrived within", timeout: .seconds(5))
    }
    // MARK: Per-uid bounds

    /// Starts sending each line on a connection of its own as another uid (or as root with an
    /// empty prefix), all before reading any answer (or one after another with `sequential`);
    /// ``answers(_:)`` collects the answers in order.
    private static func startConcurrently(
        _ daemon: DaemonProcess,
        as prefix: [String],
        _ lines: [String],
        sequential: Bool = false
    ) throws -> (Process, Pipe) {
        let script = """
            import json, socket, sys
            lines = json.load(sys.stdin)
            def ask(line):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(line.encode() + b"\\n"); return s
            if sys.argv[2] == "1":
                for line in lines:
                    print(ask(line).makefile().readline().strip(), flush=True)
            else:
                # Each answer printed as it arrives, so that a reader sees the quick ones first.
                import selectors
                waiting = selectors.DefaultSelector()
                for s in [ask(line) for line in lines]:
                    waiting.register(s, selectors.EVENT_READ, s.makefile())
                while waiting.get_map():
                    for key, _ in waiting.select():
                        print(key.data.readline().strip(), flush=True)
                        waiting.unregister(key.fileobj)
            """
        let process = Process()
        let command = prefix + ["/usr/bin/python3", "-c", script, daemon.socketPath, sequential ? "1" : "0"]
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: lines))
        try input.fileHandleForWriting.close()
        return (process, output)
    }

    /// The next answer line of a started helper (`nil` at its end).
    private static func nextAnswer(_ started: (Process, Pipe)) -> [String: Any]? {
        var line = Data()
        while true {
            let byte = started.1.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { return line.isEmpty ? nil : (try? JSONSerialization.jsonObject(with: line) as? [String: Any]) ?? [:] }
            if byte == Data([0x0A]) { return (try? JSONSerialization.jsonObject(with: line) as? [String: Any]) ?? [:] }
            line.append(byte)
        }
    }

    private static func answers(_ started: (Process, Pipe)) -> [[String: Any]] {
        let data = started.1.fileHandleForReading.readDataToEndOfFile()
        started.0.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
            .map { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) ?? [:] }
    }

    private static func concurrently(_ daemon: DaemonProcess, as prefix: [String], _ lines: [String], sequential: Bool = false) throws -> [[String: Any]] {
        answers(try startConcurrently(daemon, as: prefix, lines, sequential: sequential))
    }

    private static func login(_ provider: String, session: String, password: String = "demo-password-1") -> String {
        #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"\#(provider)","username":"demo","password":"\#(password)","session":"\#(session)"}}"#
    }

    @Test(
        "a uid's sessions are capped (--max-sessions-per-user); replacing one is allowed; another uid is still served",
        .enabled(if: canSwitchUsers, "needs root, setpriv and /usr/bin/python3 to act as other uids")
    )
    func sessionsPerUser() throws {
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.mock],
            arguments: ["--max-sessions-per-user", "3", "--socket-group", "nogroup"],
            logLevel: "info"
        )
        chmod(daemon.scratch.path, 0o755)
        let asDaemonUser = ["/usr/bin/setpriv", "--reuid=1", "--regid=65534", "--clear-groups", "--"]
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        let replies = try Self.concurrently(daemon, as: asDaemonUser, ["a", "b", "c", "d", "a"].map { Self.login("mock", session: $0) }, sequential: true)
        #expect(replies.map { $0.errorReason ?? "ok" } == ["ok", "ok", "ok", "rate_limited", "ok"], "\(replies)")
        #expect(replies[3].errorMessage?.contains("3 sessions") == true)
        let other = try Self.concurrently(daemon, as: asNobody, [Self.login("mock", session: "x")])
        #expect(other.first?.errorReason == nil, "\(other)")
    }

    @Test(
        "parallel wrong passwords: attempts in flight count, so no more than 5 reach the provider; another uid still signs in",
        .enabled(if: canSwitchUsers, "needs root, setpriv and /usr/bin/python3 to act as other uids")
    )
    func parallelGuesses() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.slowMock(300)], arguments: ["--socket-group", "nogroup"], logLevel: "info")
        chmod(daemon.scratch.path, 0o755)
        let asDaemonUser = ["/usr/bin/setpriv", "--reuid=1", "--regid=65534", "--clear-groups", "--"]
        // Two failures first; then eight at once: three may still be tried (5 - 2), however many
        // are sent in parallel (without counting those in flight, the provider share's 4 would pass).
        let first = try Self.concurrently(
            daemon,
            as: asDaemonUser,
            (0..<2).map { Self.login("mock", session: "a\($0)", password: "wrong-\($0)") },
            sequential: true
        )
        #expect(first.map { $0.errorReason ?? "ok" } == ["invalid_credentials", "invalid_credentials"])
        let replies = try Self.concurrently(daemon, as: asDaemonUser, (0..<8).map { Self.login("mock", session: "s\($0)", password: "wrong-password-\($0)") })
        let reasons = replies.map { $0.errorReason ?? "ok" }
        #expect(reasons.count == 8)
        #expect(reasons.count { $0 == "invalid_credentials" } == 3, "\(reasons)")
        #expect(reasons.count { $0 == "rate_limited" } == 5, "\(reasons)")
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        #expect(try Self.concurrently(daemon, as: asNobody, [Self.login("mock", session: "x")]).first?.errorReason == nil)
    }

    @Test(
        "requests of connections closed before their answers still count against the uid's share: a loop of connect, slow request, close cannot pile up work",
        .enabled(if: canSwitchUsers, "needs root, setpriv and /usr/bin/python3 to act as other uids")
    )
    func closedConnectionsRequestsCount() throws {
        // --max-connections 8: a uid's share is 2 connections, and 2 requests under way.
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.slowMock(3000)],
            arguments: ["--socket-group", "nogroup", "--max-connections", "8"],
            logLevel: "info"
        )
        chmod(daemon.scratch.path, 0o755)
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        // Two sign-ins at the 3 s provider, their connections closed at once; then `status`
        // (quick) until one is refused, for at most 2.5 s (before the sign-ins end).
        let script = """
            import json, socket, sys, time
            def connect():
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); return s
            for index in range(2):
                s = connect()
                s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "login", "params": {
                    "provider": "mock", "username": "demo", "password": "demo-password-1", "session": "s%d" % index}}).encode() + b"\\n")
                s.close()
            deadline = time.monotonic() + 2.5
            answer = {}
            while time.monotonic() < deadline:
                s = connect()
                s.sendall(b'{"jsonrpc":"2.0","id":"probe-7","method":"status","params":{}}\\n')
                answer = json.loads(s.makefile().readline())
                s.close()
                if "requests of one user" in answer.get("error", {}).get("message", ""): break
            print(json.dumps(answer))
            """
        let result = try run(URL(fileURLWithPath: asNobody[0]), Array(asNobody.dropFirst()) + ["/usr/bin/python3", "-c", script, daemon.socketPath])
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
        #expect(answer.errorReason == "rate_limited" && answer["id"] as? String == "probe-7", "\(answer)")
        #expect(((answer["error"] as? [String: Any])?["message"] as? String)?.contains("requests of one user at once") == true, "\(answer)")
        // Once they have ended, the uid is served again; another uid all along.
        let asDaemonUser = ["/usr/bin/setpriv", "--reuid=1", "--regid=65534", "--clear-groups", "--"]
        #expect(try Self.concurrently(daemon, as: asDaemonUser, [#"{"jsonrpc":"2.0","id":1,"method":"status","params":{}}"#]).first?.errorReason == nil)
        try eventually(timeout: .seconds(10)) {
            try Self.concurrently(daemon, as: asNobody, [#"{"jsonrpc":"2.0","id":1,"method":"status","params":{}}"#]).first?.errorReason == nil
        }
    }

    @Test(
        "one uid gets at most 4 requests at providers at once; another uid is served meanwhile",
        .enabled(if: canSwitchUsers, "needs root, setpriv and /usr/bin/python3 to act as other uids")
    )
    func providerShare() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.slowMock(1500)], arguments: ["--socket-group", "nogroup"], logLevel: "info")
        chmod(daemon.scratch.path, 0o755)
        let asDaemonUser = ["/usr/bin/setpriv", "--reuid=1", "--regid=65534", "--clear-groups", "--"]
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        let started = ContinuousClock.now
        let mine = try Self.startConcurrently(daemon, as: asDaemonUser, (0..<8).map { Self.login("mock", session: "s\($0)") })
        // The refusals come at once; once four are in, the other four hold uid 1's share at the
        // 1.5 s provider.
        var early: [[String: Any]] = []
        while early.count(where: { $0.errorReason == "rate_limited" }) < 4, let answer = Self.nextAnswer(mine) { early.append(answer) }
        let other = try Self.concurrently(daemon, as: asNobody, [Self.login("mock", session: "x")])
        #expect(other.first?.errorReason == nil, "uid 65534 signed in meanwhile: \(other)")
        let reasons = (early + Self.answers(mine)).map { $0.errorReason ?? "ok" }
        #expect(reasons.count { $0 == "ok" } == 4 && reasons.count { $0 == "rate_limited" } == 4, "\(reasons)")
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test(
        "a begin/cancel loop: new sign-ins at a provider are refused after 10 (rate_limited), and the finished flows kept per uid are bounded (the oldest outcomes forgotten)"
    )
    func beginCancelLoopBounded() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "authorization_pending")
        let file = faultyProviderFile(server, grants: #"["device_code"]"#)
        let daemon = try DaemonProcess(providers: ["faulty.json": file, "faulty2.json": file], logLevel: "info")
        try daemon.waitForLog("provider ready")
        let connection = try daemon.connect()
        var flowIDs: [String] = []
        // 10 at each of two providers: 20 finished flows for one uid. The 11th at the first is
        // asked at once (one comes back only 10 s after the first).
        for provider in ["faulty", "faulty2"] {
            for _ in 0..<10 {
                let begin = try call(connection, "login.begin", ["provider": provider, "grant": "device_code"])
                let flowID = try #require(begin.object["flow_id"] as? String, "\(begin)")
                #expect(try call(connection, "login.cancel", ["flow_id": flowID]).object["cancelled"] as? Bool == true)
                flowIDs.append(flowID)
            }
            if provider == "faulty" {
                let refused = try call(connection, "login.begin", ["provider": "faulty", "grant": "device_code"])
                #expect(refused.errorReason == "rate_limited" && refused.errorMessage?.contains("try again in") == true, "\(refused)")
            }
        }
        #expect(try call(connection, "login.complete", ["flow_id": flowIDs[0]]).errorReason == "flow_expired", "the oldest was forgotten")
        let newest = try call(connection, "login.complete", ["flow_id": flowIDs[19]])
        #expect(newest.errorMessage?.contains("cancelled") == true, "\(newest)")
    }

    // MARK: Timeouts do not flood the log

    @Test("100 silent connections closed by the first-byte deadline are one log line, then one summary")
    func timeoutsAreBatched() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let silent = try (0..<100).map { _ in try daemon.connect() }
        for connection in silent { #expect(try connection.receiveLine() == nil, "closed by the daemon") }
        // The log arrives through a pipe a moment after the closes: wait for the line, then count.
        try daemon.waitForLog("closing a connection: nothing arrived within")
        #expect(daemon.logText.components(separatedBy: "closing a connection: nothing arrived within").count - 1 == 1, "\(daemon.logText.suffix(3000))")
        try daemon.waitForLog("more connections closed by a deadline in the last 10 s", timeout: .seconds(15))
        #expect(daemon.logText.contains("connections.timed_out=99"), "\(daemon.logText.suffix(2000))")
    }
}
