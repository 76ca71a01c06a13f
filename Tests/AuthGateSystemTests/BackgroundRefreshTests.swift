import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A provider file for the fault-injecting provider, with a short backoff cap.
private func faultyProvider(_ server: LoopbackServer, maxBackoff: Int = 300) -> String {
    #"""
    {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
     "tls": {"ca_file": "\#(server.caFile)"}, "timeouts": {"connect_ms": 1000, "total_ms": 5000},
     "refresh": {"before_expiry_seconds": 60, "max_backoff_seconds": \#(maxBackoff)}}
    """#
}

/// The caller's one session, as `status --json` shows it.
private func session(_ daemon: DaemonProcess) throws -> [String: Any] {
    let status = try daemon.cli(["status", "--json"]).stdout
    return ((try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [[String: Any]]) ?? []).first ?? [:]
}

/// Polls `status` until `condition` holds, for at most `timeout`.
private func waitForSession(
    _ daemon: DaemonProcess,
    timeout: Duration = .seconds(20),
    _ condition: ([String: Any]) -> Bool
) throws -> [String: Any] {
    var current: [String: Any] = [:]
    try eventually(timeout: timeout, every: .milliseconds(100), "the session never got there: \(current)") {
        current = try session(daemon)
        return condition(current)
    }
    return current
}

/// Sessions kept fresh by the daemon itself, against real servers on loopback.
@Suite("Background refresh", .serialized)
struct BackgroundRefreshTests {
    @Test("a session's token changes in the background with no client call")
    func refreshedWithoutCaller() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", accessTokenLifetime: 3)
        let daemon = try DaemonProcess(providers: [
            "corp.json": #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate-password", "grants": ["password"],
             "scopes": ["openid"], "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        ])
        try daemon.signIn("corp", username: "alice", password: "alice-password-1")
        let first = try daemon.cli(["token", "corp", "--min-valid", "0"]).stdout
        // A refresh is planned. `status` shows no plan while a refresh runs, which a loaded
        // machine can catch (the token lives 3 s): the plan that follows it counts as well.
        _ = try waitForSession(daemon) { $0["next_refresh_at"] is String }
        try daemon.waitForLog("session refreshed")
        let second = try daemon.cli(["token", "corp", "--min-valid", "0"]).stdout
        // Neither call needed a refresh (the first token was fresh, the second came after the
        // log line): the scheduler did it.
        #expect(!second.isEmpty && second != first)
    }

    @Test("1,000 concurrent callers on a token that needs refreshing cause one provider request")
    func refreshStorm() throws {
        let scratch = try ScratchDirectory()
        // Callers ask for 7,200 s: the signed-in token (7,100 s) needs a refresh for every one of
        // them, and the refreshed one (7,300 s) serves them all — so a caller the daemon reads
        // only after the refresh (a loaded machine reads 1,000 connections slowly) must not
        // cause a second one, as it did when no refreshed token could satisfy the callers.
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok", expiresIn: 7100)
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)], logLevel: "info")
        try daemon.waitForLog("provider ready")
        try daemon.signIn("faulty", username: "alice", password: "alice-password-1")
        // Each reply takes a second, so every caller arrives while the one refresh is in flight.
        try server.setMode("slow", delay: 1, expiresIn: 7300)
        let before = try server.tokenRequests()
        let request = #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"faulty","min_valid_seconds":7200}}"# + "\n"

        // 1,000 connections (one connection answers its requests in order, so concurrent
        // callers need their own), each request written before any answer is read — and as
        // soon as its connection is open: the daemon closes a connection that sends nothing
        // within 2 s (the first-byte deadline), and a loaded machine takes longer than that to
        // open 1,000 (the writes then failed with "connection reset").
        let connections = try (0..<1000).map { _ in
            let connection = try daemon.connect()
            try connection.send(Array(request.utf8))
            return connection
        }
        var tokens: Set<String> = []
        for connection in connections {
            let reply = try readReply(connection)
            if let token = (reply.result as? [String: Any])?["access_token"] as? String { tokens.insert(token) }
        }
        let requests = try server.tokenRequests() - before
        print("refresh storm: 1,000 concurrent callers → \(requests) token request(s) at the provider")
        #expect(requests == 1)
        #expect(tokens.count == 1, "every caller got the one refreshed token")
    }

    @Test("an outage: the old token until expiry, then expired with last_error, then recovery by itself; invalid_grant ends it")
    func outage() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok", expiresIn: 4)
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server, maxBackoff: 1)], logLevel: "info")
        try daemon.waitForLog("provider ready")
        try daemon.signIn("faulty", username: "alice", password: "alice-password-1")
        let signedInAt = ContinuousClock.now
        let original = try daemon.cli(["token", "faulty", "--min-valid", "0"]).stdout
        try server.setMode("http500")

        // Refreshes fail from about a second in; until the 4 s token expires it is still served.
        try daemon.waitForLog("refresh failed; retrying")
        if ContinuousClock.now - signedInAt < .seconds(3) {
            #expect(try daemon.cli(["token", "faulty", "--min-valid", "0"]).stdout == original)
        }
        let expired = try waitForSession(daemon) { $0["state"] as? String == "expired" }
        #expect((expired["last_error"] as? String)?.contains("faulty") == true, "\(expired)")
        let refused = try daemon.cli(["token", "faulty", "--min-valid", "0"])
        #expect(refused.status == 7, "\(refused.stderr)")
        #expect(refused.stderr.contains("[service_unavailable]"))

        try server.setMode("ok")
        let recovered = try waitForSession(daemon) { $0["state"] as? String == "authenticated" }
        #expect(recovered["last_error"] == nil)
        let fresh = try daemon.cli(["token", "faulty", "--min-valid", "0"]).stdout
        #expect(fresh != original && !fresh.isEmpty)

        try server.setMode("invalid_grant")
        let ended = try waitForSession(daemon) { $0["state"] as? String == "login_required" }
        #expect(ended["expires_at"] == nil, "the tokens are cleared at once")
        #expect(try daemon.cli(["token", "faulty"]).status == 3)
    }

    /// The old scheduler started at most 32 refreshes a second: 300 sessions of 3 s tokens
    /// need about 190, so most samples were `expired`.
    @Test("300 sessions of 3 s tokens, untouched for 8 s: no status sample is ever expired, and refreshes start on time")
    func manySessionsKeepUp() throws {
        let daemon = try DaemonProcess(
            providers: [
                "mock.json": #"""
                {"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}],
                 "access_token_lifetime_seconds": 3, "refresh": {"before_expiry_seconds": 1}}
                """#
            ],
            logLevel: "notice"
        )
        let connection = try daemon.connect()
        let count = 300
        for index in 0..<count {
            let login = try exchange(
                connection,
                #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1","session":"s\#(index)"}}"#
            )
            #expect(login.result != nil, "\(login)")
        }
        let until = ContinuousClock.now + .seconds(8)
        var samples = 0
        var expired = 0
        while ContinuousClock.now < until {
            let status = try exchange(connection, #"{"jsonrpc":"2.0","id":2,"method":"status"}"#)
            let sessions = try #require(status.result as? [[String: Any]])
            #expect(sessions.count == count)
            samples += sessions.count
            expired += sessions.count { ["expired", "login_required"].contains($0["state"] as? String) }
            usleep(200_000)  // the sampling period of the 8 s window
        }
        let info = try exchange(connection, #"{"jsonrpc":"2.0","id":3,"method":"daemon.info"}"#)
        let refresh = try #require((info.result as? [String: Any])?["refresh"] as? [String: Any])
        let started = refresh["started"] as? Int ?? 0
        let p99 = refresh["lateness_p99_seconds"] as? Double ?? .infinity
        print(
            String(
                format: "refresh at scale: %d sessions of 3 s tokens, 8 s: %d of %d samples expired, %d refreshes, lateness p99 %.3f s",
                count,
                expired,
                samples,
                started,
                p99
            )
        )
        #expect(expired == 0)
        #expect(started >= count * 3, "every session refreshed several times")
        #expect(p99 <= 1)
        #expect(!daemon.logText.contains("refreshes fall behind"))
    }

    @Test("a provider slower than its sessions need: the backlog is warned about and shown, and another provider's sessions stay fresh")
    func slowProviderBacklog() throws {
        let daemon = try DaemonProcess(
            providers: [
                "slow.json": #"""
                {"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "latency_ms": [300, 300],
                 "access_token_lifetime_seconds": 4, "refresh": {"before_expiry_seconds": 1}}
                """#,
                "fast.json": #"""
                {"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}],
                 "access_token_lifetime_seconds": 3, "refresh": {"before_expiry_seconds": 1}}
                """#,
            ],
            logLevel: "notice"
        )
        // 8 slots for a 300 ms provider: about 27 refreshes a second, where 100 sessions of 4 s
        // tokens need about 40.
        // Every sign-in on its own connection, all written before any answer is read: the
        // 300 ms of each overlap.
        let logins = (0..<100).map { ("slow", "s\($0)") } + (0..<50).map { ("fast", "f\($0)") }
        let pending = try logins.map { provider, session in
            let connection = try daemon.connect()
            try connection.send(
                Array(
                    (#"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"\#(provider)","username":"demo","password":"demo-password-1","session":"\#(session)"}}"#
                        + "\n").utf8
                )
            )
            return connection
        }
        for connection in pending {
            let reply = try readReply(connection)
            #expect(reply.result != nil, "\(reply)")
        }
        try daemon.waitForLog("refreshes fall behind", timeout: .seconds(20))
        let warning = daemon.logText.split(separator: "\n").first { $0.contains("refreshes fall behind") } ?? ""
        #expect(warning.contains("slow") && warning.contains("refresh.waiting") && !warning.contains("fast"), "\(warning)")
        // Opened now: a connection that sends nothing for 2 s is closed (the first-byte deadline).
        let connections = try (0..<2).map { _ in try daemon.connect() }
        var sawOverdue = false
        var shownOverdue = false
        var fastExpired = 0
        let until = ContinuousClock.now + .seconds(4)
        while ContinuousClock.now < until {
            let status = try exchange(connections[1], #"{"jsonrpc":"2.0","id":2,"method":"status"}"#)
            let sessions = try #require(status.result as? [[String: Any]])
            sawOverdue = sawOverdue || sessions.contains { $0["provider"] as? String == "slow" && $0["refresh_overdue_seconds"] != nil }
            fastExpired += sessions.count {
                $0["provider"] as? String == "fast" && $0["state"] as? String != "authenticated" && $0["state"] as? String != "refreshing"
            }
            shownOverdue = try shownOverdue || daemon.cli(["status", "slow"]).stdout.contains("overdue by")
            usleep(100_000)  // the sampling period of the 4 s window
        }
        #expect(sawOverdue, "status shows the slow provider's sessions waiting")
        #expect(fastExpired == 0, "the fast provider's sessions stay fresh")
        let warnings = daemon.logText.components(separatedBy: "refreshes fall behind").count - 1
        #expect(warnings == 1, "once per interval, not once per refresh")
        #expect(shownOverdue, "authgate status shows it")
    }
}
