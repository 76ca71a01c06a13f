import AuthGateRPC
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

private func signIn(_ daemon: DaemonProcess, _ provider: String) throws {
    let login = try daemon.cli(["login", provider, "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
    #expect(login.status == 0, "\(login.stderr)")
}

/// The caller's one session, as `status --json` shows it.
private func session(_ daemon: DaemonProcess) throws -> [String: Any] {
    let status = try daemon.cli(["status", "--json"]).stdout
    return ((try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [[String: Any]]) ?? []).first ?? [:]
}

/// Polls `status` until `condition` holds, for at most `timeout`.
private func waitForSession(_ daemon: DaemonProcess, timeout: Duration = .seconds(20),
                            _ condition: ([String: Any]) -> Bool) throws -> [String: Any] {
    let deadline = ContinuousClock.now + timeout
    while true {
        let current = try session(daemon)
        if condition(current) { return current }
        guard ContinuousClock.now < deadline else { throw TestFailure("the session never got there: \(current)") }
        usleep(100_000)
    }
}

/// Sessions kept fresh by the daemon itself, against real servers on loopback.
@Suite("Background refresh", .serialized)
struct BackgroundRefreshTests {
    @Test("a session's token changes in the background with no client call")
    func refreshedWithoutCaller() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", accessTokenLifetime: 3)
        let daemon = try DaemonProcess(providers: ["corp.json": #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate-password", "grants": ["password"],
             "scopes": ["openid"], "tls": {"ca_file": "\#(server.caFile)"}}
            """#])
        try signIn(daemon, "corp")
        let first = try daemon.cli(["token", "corp", "--min-valid", "0"]).stdout
        let planned = try session(daemon)["next_refresh_at"] as? String
        #expect(planned != nil)
        try daemon.waitForLog("session refreshed")
        let second = try daemon.cli(["token", "corp", "--min-valid", "0"]).stdout
        // Neither call needed a refresh (the first token was fresh, the second came after the
        // log line): the scheduler did it.
        #expect(!second.isEmpty && second != first)
    }

    @Test("1,000 concurrent callers on a token that needs refreshing cause one provider request")
    func refreshStorm() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)], logLevel: "info")
        try daemon.waitForLog("provider ready")
        try signIn(daemon, "faulty")
        // Each reply takes a second, so every caller arrives while the one refresh is in flight.
        try server.setMode("slow", delay: 1)
        let before = try server.tokenRequests()

        // 1,000 connections (one connection answers its requests in order, so concurrent
        // callers need their own), each request written before any answer is read. The
        // one-hour token must stay valid two hours: every caller needs a refresh.
        let request = #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"faulty","min_valid_seconds":7200}}"# + "\n"
        let connections = try (0..<1000).map { _ in try daemon.connect() }
        for connection in connections {
            try connection.send(Array(request.utf8))
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
        try signIn(daemon, "faulty")
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
}
