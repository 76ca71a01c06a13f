import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Device-code polling (RFC 8628 §3.4, §3.5) against the fault-injecting provider, for what
/// the real server never does: `slow_down`, `expired_token`, 5xx while polling.
@Suite("Device code polling against a misbehaving provider", .serialized)
struct DevicePollingTests {
    private func setUp() throws -> (ScratchDirectory, LoopbackServer, DaemonProcess) {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let provider = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["device_code"], "scopes": ["openid"],
             "tls": {"ca_file": "\#(server.caFile)"}, "endpoints": {"device_authorization": "\#(server.issuer)/device"}}
            """#
        let daemon = try DaemonProcess(providers: ["faulty.json": provider])
        try daemon.waitForLog("provider ready")
        return (scratch, server, daemon)
    }

    private func begin(_ connection: RPCConnection) throws -> String {
        let reply = try call(connection, "login.begin", ["provider": "faulty", "grant": "device_code"])
        guard let flowID = reply.object["flow_id"] as? String else { throw TestFailure("login.begin failed: \(reply)") }
        #expect(reply.object["user_code"] as? String != nil)
        return flowID
    }

    @Test("slow_down adds 5 s to the interval; expired_token ends the flow with flow_expired")
    func slowDownThenExpired() throws {
        let (scratch, server, daemon) = try setUp()
        defer { withExtendedLifetime((scratch, server, daemon)) {} }
        try server.setMode("slow_down")
        let connection = try daemon.connect()
        let before = try server.tokenRequests()
        let started = ContinuousClock.now
        let flowID = try begin(connection)
        usleep(4_000_000)  // on purpose: a window in which a second poll would be too early
        // Interval 1 s: one poll at ~1 s, answered slow_down, so the next is due at ~7 s, not ~2 s.
        #expect(try server.tokenRequests() - before == 1)
        try server.setMode("expired_token")
        let reply = try call(connection, "login.complete", ["flow_id": flowID])
        #expect(reply.errorReason == "flow_expired", "\(reply)")
        #expect(reply.errorMessage?.contains("expired_token") == true)
        #expect(ContinuousClock.now - started >= .seconds(6))
        #expect(try server.tokenRequests() - before == 2)
    }

    @Test("access_denied while polling is permission_denied")
    func accessDenied() throws {
        let (scratch, server, daemon) = try setUp()
        defer { withExtendedLifetime((scratch, server, daemon)) {} }
        try server.setMode("access_denied")
        let connection = try daemon.connect()
        let reply = try call(connection, "login.complete", ["flow_id": try begin(connection)])
        #expect(reply.errorReason == "permission_denied", "\(reply)")
    }

    @Test("a provider failing while the user approves is polled again (backing off), and the sign-in succeeds")
    func outageWhilePolling() throws {
        let (scratch, server, daemon) = try setUp()
        defer { withExtendedLifetime((scratch, server, daemon)) {} }
        let connection = try daemon.connect()
        let flowID = try begin(connection)
        try server.setMode("http503")  // the first poll is due 1 s after the code was issued
        try eventually { try server.tokenRequests() >= 1 }
        try server.setMode("ok")
        let reply = try call(connection, "login.complete", ["flow_id": flowID])
        #expect(reply.object["subject"] as? String == "faulty-user", "\(reply)")
        #expect(reply.object["state"] as? String == "authenticated")
        #expect(!daemon.logText.contains("faulty-dc-"), "the device code is never logged")
        #expect(!daemon.logText.contains("faulty-at-"), "nor the token")
    }
}
