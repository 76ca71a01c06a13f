import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `provider test`'s steps (ProviderTestRun) in process, against a daemon of one answer per
/// method; the built CLI runs them against real sign-ins in ProviderTestCommandTests.
@Suite("provider test: its sign-in, inspection and sign-out")
struct ProviderTestRunTests {
    private static let inspection = SessionInspection(
        provider: "svc",
        session: ProviderTestRun.sessionName,
        grant: .clientCredentials,
        tokenType: "Bearer",
        expiresAt: Date(timeIntervalSince1970: 2_000_000_000),
        accessTokenLifetimeSeconds: 3600,
        scopesRequested: [],
        scopesGranted: [],
        idTokenExpected: false,
        idToken: nil,
        refreshToken: false,
        refresh: RefreshFacts(status: .notPossible),
        userinfo: nil,
        dpop: DPoPFacts(required: false, bound: false, jkt: nil)
    )

    /// A daemon whose provider `svc` offers `grants`, and that answers the test's calls.
    private static func daemon(in directory: String, grants: [Grant]) throws -> StandInDaemon {
        try StandInDaemon(in: directory) { method, id in
            switch method {
            case "providers.list": DaemonAnswers.providers("svc", grants: grants, requestID: id)
            case "login":
                DaemonAnswers.result(
                    LoginResult(provider: "svc", session: ProviderTestRun.sessionName, state: .authenticated, expiresAt: Date(), subject: nil),
                    id: id
                )
            case "session.inspect": DaemonAnswers.result(Self.inspection, id: id)
            case "logout": DaemonAnswers.result(LogoutResult(removed: true, revocation: RevocationReport(.revoked)), id: id)
            default: DaemonAnswers.error(.methodNotFound, "no \(method) here", id: id)
            }
        }
    }

    private static func methods(_ daemon: StandInDaemon) -> [String] {
        daemon.requests.compactMap { $0.firstMatch(of: /"method":"([^"]+)"/).map { String($0.1) } }
    }

    @Test("a service's provider: its client credentials grant, as login would choose it, into the test's session, then the inspection and the sign-out")
    func serviceGrant() throws {
        let scratch = try ScratchDirectory()
        let daemon = try Self.daemon(in: scratch.path, grants: [.clientCredentials])
        let report = try ProviderTestRun(provider: "svc", method: SignInChoice(), keep: false, daemon: DaemonConnection(socket: daemon.path)).run()
        #expect(Self.methods(daemon) == ["providers.list", "login", "session.inspect", "logout"])
        let login = try #require(daemon.requests.first { $0.contains(#""method":"login""#) })
        #expect(login.contains(#""grant":"client_credentials""#) && login.contains(#""session":"authgate-provider-test""#), "\(login)")
        #expect(report.provider == "svc" && report.checks.contains { $0.name == "revocation" })
    }

    @Test("--keep leaves the test's session signed in")
    func keep() throws {
        let scratch = try ScratchDirectory()
        let daemon = try Self.daemon(in: scratch.path, grants: [.clientCredentials])
        _ = try ProviderTestRun(provider: "svc", method: SignInChoice(), keep: true, daemon: DaemonConnection(socket: daemon.path)).run()
        #expect(!Self.methods(daemon).contains("logout"))
    }

    @Test("a provider with only the password grant has nothing to test with: status 6, and no sign-in is tried")
    func nothingToTestWith() throws {
        let scratch = try ScratchDirectory()
        let daemon = try Self.daemon(in: scratch.path, grants: [.password])
        let failure = #expect(throws: ToolFailure.self) {
            try ProviderTestRun(provider: "svc", method: SignInChoice(), keep: false, daemon: DaemonConnection(socket: daemon.path)).run()
        }
        #expect(failure?.status == ToolFailure.providerUnusable && failure?.description.hasSuffix("[unsupported_grant]") == true)
        #expect(!Self.methods(daemon).contains("login"))
    }
}
