import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The daemon as a process, driven through its real socket with raw JSON-RPC lines.
@Suite("authgated over its socket")
struct RPCServerTests {
    @Test("providers.list shows each provider's status, with the reason for invalid and unreachable ones")
    func providersList() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock, "corp.json": Providers.oidc, "broken.json": Providers.broken])
        let reply = try exchange(try daemon.connect(), #"{"jsonrpc":"2.0","id":1,"method":"providers.list"}"#)
        let list = try #require(reply.result as? [[String: Any]])
        #expect(list.map { $0["id"] as? String } == ["broken", "corp", "mock"])
        // `corp` starts unchecked and turns unreachable once its discovery has failed.
        try daemon.waitForLog("provider unreachable")
        let checked = try #require(try exchange(try daemon.connect(), #"{"jsonrpc":"2.0","id":2,"method":"providers.list"}"#).result as? [[String: Any]])
        #expect(checked.map { $0["status"] as? String } == ["invalid", "unreachable", "ready"])
        #expect((checked[1]["status_reason"] as? String)?.contains("Cannot reach corp: cannot connect to 127.0.0.1:1") == true)
        let brokenReason = try #require(list[0]["status_reason"] as? String)
        #expect(brokenReason.contains("providers.d/broken.json"))
        #expect(brokenReason.contains(#"$.latency: unknown key for a provider of type "mock" (did you mean "latency_ms"?)"#))
        #expect(list[2]["status_reason"] == nil)
        #expect(list[2]["grants"] as? [String] == ["password"])
        #expect(list[2]["registration"] as? Bool == true)
        try daemon.waitForLog("provider invalid", timeout: .seconds(10))
    }

    @Test("login, token while valid, status without token values, logout")
    func sessionLifecycle() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let connection = try daemon.connect()
        let login = try exchange(
            connection,
            #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#
        )
        let loginResult = try #require(login.result as? [String: Any], "\(login)")
        #expect(loginResult["state"] as? String == "authenticated")
        #expect(loginResult["subject"] as? String == "mock:demo")
        #expect(loginResult["session"] as? String == "default")

        let first = try #require(try exchange(connection, #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"#).result as? [String: Any])
        let second = try #require(
            try exchange(connection, #"{"jsonrpc":"2.0","id":3,"method":"token","params":{"provider":"mock","min_valid_seconds":60}}"#).result as? [String: Any]
        )
        let token = try #require(first["access_token"] as? String)
        #expect(token.hasPrefix("mock_at_"))
        #expect(second["access_token"] as? String == token, "a valid token is reused")
        #expect(first["token_type"] as? String == "Bearer")

        let forced = try #require(
            try exchange(connection, #"{"jsonrpc":"2.0","id":4,"method":"token","params":{"provider":"mock","force_refresh":true}}"#).result as? [String: Any]
        )
        let refreshed = try #require(forced["access_token"] as? String)
        #expect(refreshed != token)

        let statusLine = try connection.callRaw(#"{"jsonrpc":"2.0","id":5,"method":"status"}"#)
        #expect(!statusLine.contains(token) && !statusLine.contains(refreshed) && !statusLine.contains("mock_rt_"))
        let status = try #require(try JSONSerialization.jsonObject(with: Data(statusLine.utf8)) as? [String: Any])
        let sessions = try #require(status["result"] as? [[String: Any]])
        #expect(sessions.count == 1)
        #expect(sessions.first?["state"] as? String == "authenticated")
        #expect(sessions.first?["expires_at"] is String)

        let logout = try exchange(connection, #"{"jsonrpc":"2.0","id":6,"method":"logout","params":{"provider":"mock"}}"#)
        #expect((logout.result as? [String: Any])?["removed"] as? Bool == true)
        let after = try exchange(connection, #"{"jsonrpc":"2.0","id":7,"method":"token","params":{"provider":"mock"}}"#)
        #expect(after.errorReason == "login_required")
        #expect(after.errorCode == -32008)
        let again = try exchange(connection, #"{"jsonrpc":"2.0","id":8,"method":"logout","params":{"provider":"mock"}}"#)
        #expect((again.result as? [String: Any])?["removed"] as? Bool == false)
        let empty = try exchange(connection, #"{"jsonrpc":"2.0","id":9,"method":"status"}"#)
        #expect((empty.result as? [Any])?.isEmpty == true)
    }

    @Test("an expiring token is refreshed before it is handed out")
    func refreshOnDemand() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.shortLivedMock(30)])
        let connection = try daemon.connect()
        _ = try exchange(connection, #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#)
        let first = try #require(try exchange(connection, #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"#).result as? [String: Any])
        // The token lives 30 s: asking for 60 s of validity forces a refresh with the refresh token.
        let second = try #require(
            try exchange(connection, #"{"jsonrpc":"2.0","id":3,"method":"token","params":{"provider":"mock","min_valid_seconds":60}}"#).result as? [String: Any]
        )
        #expect(first["access_token"] as? String != second["access_token"] as? String)
        // The log line may follow the answer by a moment.
        try daemon.waitForLog("session refreshed", timeout: .seconds(5))
    }

    @Test("token.rejected refreshes a still-current token once; a replaced one is answered with the current token")
    func tokenRejected() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let connection = try daemon.connect()
        _ = try exchange(connection, #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#)
        func accessToken(_ reply: [String: Any]) -> String? { (reply.result as? [String: Any])?["access_token"] as? String }
        let old = try #require(accessToken(try exchange(connection, #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"#)))
        let rejected = #"{"jsonrpc":"2.0","id":3,"method":"token.rejected","params":{"provider":"mock","access_token":"\#(old)"}}"#
        let fresh = try #require(accessToken(try exchange(connection, rejected)))
        #expect(fresh != old)
        // The same stale token reported again (another client of the same API): no new refresh.
        #expect(accessToken(try exchange(try daemon.connect(), rejected)) == fresh)
        // The same token twice already says there was no second refresh; the log says so too
        // once its line has come through the pipe.
        try eventually { daemon.logText.components(separatedBy: "session refreshed").count - 1 == 1 }
        #expect(accessToken(try exchange(connection, #"{"jsonrpc":"2.0","id":4,"method":"token","params":{"provider":"mock"}}"#)) == fresh)
    }

    /// Each request line and the reason (and code) it must produce.
    static let errorCases: [(line: String, reason: String, code: Int)] = [
        ("this is not json", "parse_error", -32700),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}"#, "parse_error", -32700),
        (#"[{"jsonrpc":"2.0","id":1,"method":"daemon.info"}]"#, "invalid_request", -32600),
        (#""just a string""#, "invalid_request", -32600),
        (#"{"id":1,"method":"daemon.info"}"#, "invalid_request", -32600),
        (#"{"jsonrpc":"1.0","id":1,"method":"daemon.info"}"#, "invalid_request", -32600),
        (#"{"jsonrpc":"2.0","id":1}"#, "invalid_request", -32600),
        (#"{"jsonrpc":"2.0","id":1,"method":"tokens"}"#, "method_not_found", -32601),
        (#"{"jsonrpc":"2.0","id":1,"method":"token"}"#, "invalid_params", -32602),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":5}}"#, "invalid_params", -32602),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"session":"x"}}"#, "invalid_params", -32602),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","min_valid_seconds":-5}}"#, "invalid_params", -32602),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","min_valid_seconds":"10"}}"#, "invalid_params", -32602),
        (#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"","password":""}}"#, "validation_failed", -32001),
        (
            #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"x","session":"a b"}}"#, "validation_failed",
            -32001
        ),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"nope"}}"#, "unknown_provider", -32002),
        (#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"broken","username":"a","password":"b"}}"#, "provider_unavailable", -32003),
        (#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"corp","username":"a","password":"b"}}"#, "network_error", -32009),
        (#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","grant":"device_code"}}"#, "unsupported_grant", -32004),
        (#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"wrong"}}"#, "invalid_credentials", -32005),
        (
            #"{"jsonrpc":"2.0","id":1,"method":"register","params":{"provider":"mock","username":"demo","email":"d@example.com","password":"correct-horse-9","password_confirmation":"correct-horse-9"}}"#,
            "user_exists", -32006
        ),
        (
            #"{"jsonrpc":"2.0","id":1,"method":"register","params":{"provider":"mock","username":"bob","email":"b@example.com","password":"weak","password_confirmation":"weak"}}"#,
            "weak_password", -32007
        ),
        (
            #"{"jsonrpc":"2.0","id":1,"method":"register","params":{"provider":"mock","username":"bob","email":"b@example.com","password":"correct-horse-9","password_confirmation":"other-horse-9"}}"#,
            "validation_failed", -32001
        ),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}"#, "login_required", -32008),
        (#"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"private"}}"#, "permission_denied", -32012),
        (#"{"jsonrpc":"2.0","id":1,"method":"login.begin","params":{"provider":"mock","grant":"device_code"}}"#, "unsupported_grant", -32004),
        (#"{"jsonrpc":"2.0","id":1,"method":"login.complete","params":{"flow_id":"flow_nope"}}"#, "flow_expired", -32013),
        (#"{"jsonrpc":"2.0","id":1,"method":"token.rejected","params":{"provider":"mock"}}"#, "invalid_params", -32602),
    ]

    @Test("each error has its stable reason and code, a sentence, and the connection stays usable")
    func errors() throws {
        let daemon = try DaemonProcess(providers: [
            "mock.json": Providers.mock, "corp.json": Providers.oidc, "broken.json": Providers.broken,
            "private.json": #"{"type": "mock", "access": {"users": ["authgate-test-no-such-user"]}}"#,
        ])
        let connection = try daemon.connect()
        for (line, reason, code) in Self.errorCases {
            let reply = try exchange(connection, line)
            #expect(reply.errorReason == reason, "\(line)")
            #expect(reply.errorCode == code, "\(line)")
            let message = reply.errorMessage ?? ""
            #expect(message.count > 10 && message.hasSuffix("."), "a sentence for a person: \(message)")
            #expect(!message.contains("demo-password-1") && !message.contains("correct-horse-9"))
        }
        // Still usable after all of that.
        let info = try exchange(connection, #"{"jsonrpc":"2.0","id":"last","method":"daemon.info"}"#)
        #expect(info["id"] as? String == "last")
        #expect((info.result as? [String: Any])?["version"] as? String == AuthGateVersion.current)
    }

    @Test("validation errors list the refused fields")
    func validationFields() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let reply = try exchange(
            try daemon.connect(),
            #"{"jsonrpc":"2.0","id":1,"method":"register","params":{"provider":"mock","username":"","email":"nope","password":"x","password_confirmation":"y"}}"#
        )
        let data = try #require((reply["error"] as? [String: Any])?["data"] as? [String: Any])
        let fields = try #require(data["fields"] as? [[String: String]])
        #expect(fields.map { $0["field"] } == ["username", "email", "password_confirmation"])
    }

    @Test("a provider whose access rules refuse the caller is not even listed")
    func accessRules() throws {
        let daemon = try DaemonProcess(providers: [
            "mock.json": Providers.mock,
            "private.json": #"{"type": "mock", "access": {"users": ["authgate-test-no-such-user"]}}"#,
            "mine.json": #"{"type": "mock", "access": {"users": ["\#(getuid())"], "executables": ["\#(BuiltProducts.cli.path)"]}}"#,
        ])
        let list = try daemon.cli(["providers", "--json"])
        let ids = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]).map { $0["id"] as? String }
        #expect(ids == ["mine", "mock"], "the CLI is admitted by uid and executable")
        // This test process is not the CLI executable, so `mine` refuses it.
        let reply = try exchange(try daemon.connect(), #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mine"}}"#)
        #expect(reply.errorReason == "permission_denied")
    }

    @Test("requests on one connection are answered in order; notifications get no answer")
    func pipelining() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.slowMock(50)])
        let connection = try daemon.connect()
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#,
            #"{"jsonrpc":"2.0","method":"daemon.info"}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"daemon.info"}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"token","params":{"provider":"mock"}}"#,
            "",
            #"{"jsonrpc":"2.0","id":null,"method":"daemon.info"}"#,
        ]
        try connection.send(Array((lines.joined(separator: "\r\n") + "\n").utf8))
        let replies = try (0..<4).map { _ in try readReply(connection) }
        #expect(replies.map { $0["id"] as? Int } == [1, 2, 3, nil])
        #expect(replies[3]["id"] is NSNull, "id null is a request and gets an answer with id null")
        #expect(replies.allSatisfy { $0["error"] == nil })
    }

    @Test("a line over 64 KiB gets request_too_large and the connection is closed, logged once a spell; others are unaffected")
    func oversizedLine() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let bystander = try daemon.connect()
        let connection = try daemon.connect()
        let padding = String(repeating: "x", count: RPCCoding.maximumLineLength + 10)
        try connection.send(Array(#"{"jsonrpc":"2.0","id":1,"method":"daemon.info","params":{"pad":"\#(padding)"}}"#.utf8) + [0x0A])
        let reply = try readReply(connection)
        #expect(reply.errorReason == "request_too_large")
        #expect(try connection.receiveLine() == nil, "the daemon closes the connection")
        // A line of exactly the limit is still accepted.
        let exact = #"{"jsonrpc":"2.0","id":2,"method":"daemon.info","pad":""#
        let filler = String(repeating: "y", count: RPCCoding.maximumLineLength - exact.utf8.count - 2)
        let accepted = try exchange(bystander, exact + filler + "\"}")
        #expect(accepted["id"] as? Int == 2 && accepted["error"] == nil)
        // Twenty more such connections make no more than the first log line (a count follows
        // every 10 s): a loop of them cannot flood the log.
        for _ in 0..<20 {
            let another = try daemon.connect()
            try another.send(Array(#"{"pad":"\#(padding)"}"#.utf8) + [0x0A])
            #expect(try readReply(another).errorReason == "request_too_large")
        }
        let logged = daemon.logText.split(separator: "\n").filter { $0.contains("request line too long") }
        #expect(logged.count == 1, "\(logged)")
    }

    @Test("a client that never sends a newline cannot make the daemon buffer more than the limit")
    func endlessLine() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let connection = try daemon.connect()
        let chunk = [UInt8](repeating: 0x61, count: 16 * 1024)
        var reply: [String: Any]?
        for _ in 0..<8 {
            do { try connection.send(chunk) } catch { break }  // the daemon may close while we write
        }
        reply = try readReply(connection)
        #expect(reply?.errorReason == "request_too_large")
    }

    @Test("an unterminated last line from a half-closing client is still answered")
    func halfClose() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let connection = try daemon.connect()
        try connection.send(Array(#"{"jsonrpc":"2.0","id":7,"method":"daemon.info"}"#.utf8))
        try connection.shutdownWrite()
        let reply = try readReply(connection)
        #expect(reply["id"] as? Int == 7)
    }

    @Test("connections are served concurrently: a slow sign-in does not hold up another client")
    func concurrentClients() async throws {
        let daemon = try DaemonProcess(providers: ["slow.json": Providers.slowMock(1500), "mock.json": Providers.mock])
        let slowConnection = try daemon.connect()
        try slowConnection.send(
            Array(#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"slow","username":"demo","password":"demo-password-1"}}"#.utf8) + [0x0A]
        )
        let start = ContinuousClock.now
        let fast = try exchange(try daemon.connect(), #"{"jsonrpc":"2.0","id":2,"method":"providers.list"}"#)
        let fastElapsed = ContinuousClock.now - start
        #expect(fast.result != nil)
        #expect(fastElapsed < .milliseconds(1000), "answered while the slow sign-in was still running: \(fastElapsed)")
        let slow = try readReply(slowConnection)
        #expect((slow.result as? [String: Any])?["state"] as? String == "authenticated")
        #expect(ContinuousClock.now - start >= .milliseconds(1400))
    }

    @Test("the socket is created 0600")
    func socketMode() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        // FileManager, not stat(2): Glibc's struct stat belongs to whichever C module a clean
        // build imports first, which MemberImportVisibility then rejects.
        let attributes = try FileManager.default.attributesOfItem(atPath: daemon.socketPath)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        #expect(attributes[.type] as? FileAttributeType == .typeSocket)
    }

    @Test("SIGTERM shuts down gracefully and removes the socket; SIGHUP does not kill the daemon")
    func shutdown() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let idle = try daemon.connect()
        daemon.send(SIGHUP)
        try daemon.waitForLog("SIGHUP received")
        #expect(daemon.isRunning)
        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        try daemon.waitForLog("stopped", timeout: .seconds(10))
        #expect(try idle.receiveLine() == nil, "open connections are closed")
    }

    @Test("a second daemon on the same socket refuses to start and leaves the first one alone")
    func secondDaemon() throws {
        let first = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let second = try run(BuiltProducts.daemon, ["--user", "--providers", first.providersDirectory, "--socket", first.socketPath])
        #expect(second.status == 2)
        #expect(second.stderr.contains("another authgated is already listening on \(first.socketPath)"))
        let reply = try exchange(try first.connect(), #"{"jsonrpc":"2.0","id":1,"method":"daemon.info"}"#)
        #expect(reply.result != nil)
    }

    @Test("a stale socket file left by a crash is replaced")
    func staleSocket() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/s.sock"
        // Bind a socket and close it without unlinking: what a killed daemon leaves behind.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        close(fd)
        #expect(FileManager.default.fileExists(atPath: path))
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--socket", path])
        #expect(try exchange(try RPCConnection(path: path), #"{"jsonrpc":"2.0","id":1,"method":"daemon.info"}"#).result != nil)
        _ = daemon
    }

    @Test(
        "each uid sees only its own sessions",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv to run a client as another uid")
    )
    func uidIsolation() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--socket-group", "nogroup"])
        #expect(try FileManager.default.attributesOfItem(atPath: daemon.socketPath)[.posixPermissions] as? Int == 0o660)
        // The socket's directory must be reachable by the other uid.
        chmod(daemon.scratch.path, 0o755)
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        try daemon.signIn()
        let rootToken = try daemon.cli(["token", "mock"]).stdout

        let nobodyStatus = try daemon.cli(["status", "--json"], prefix: asNobody)
        #expect(nobodyStatus.status == 0, "\(nobodyStatus.stderr)")
        #expect(nobodyStatus.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        let nobodyToken = try daemon.cli(["token", "mock"], prefix: asNobody)
        #expect(nobodyToken.status == 3)
        #expect(nobodyToken.stderr.contains("login_required"))
        #expect(!nobodyToken.stdout.contains(rootToken.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(try daemon.cli(["logout", "mock"], prefix: asNobody).stdout.contains("no session"))
        #expect(try daemon.cli(["token", "mock"]).stdout == rootToken, "nobody's logout did not touch root's session")
    }
}

extension RPCConnection {
    /// Sends a raw line and returns the raw reply line.
    func callRaw(_ line: String) throws -> String {
        try send(Array((line + "\n").utf8))
        guard let reply = try receiveLine() else { throw TestFailure("connection closed") }
        return String(decoding: reply, as: UTF8.self)
    }
}
