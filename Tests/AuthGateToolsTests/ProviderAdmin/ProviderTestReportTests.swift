import AuthGateCore
import AuthGateRPC
import Foundation
import Testing

@testable import AuthGateTools

/// The checks `provider test` makes of what the daemon saw, each failure with its reason.
@Suite("provider test: the checks")
struct ProviderTestReportTests {
    private func inspection(_ change: (inout SessionInspection) -> Void = { _ in }) -> SessionInspection {
        var inspection = SessionInspection(
            provider: "corp",
            session: "authgate-provider-test",
            grant: .deviceCode,
            tokenType: "Bearer",
            expiresAt: Date(timeIntervalSince1970: 2_000_000_000),
            accessTokenLifetimeSeconds: 3600,
            scopesRequested: ["openid", "email"],
            scopesGranted: ["openid", "email"],
            idTokenExpected: true,
            idToken: IDTokenFacts(alg: "ES256", kid: "k1", iss: "https://idp.example", aud: ["corp"], claims: ["aud", "email", "iss", "name", "sub"]),
            refreshToken: true,
            refresh: RefreshFacts(status: .refreshed, rotated: false),
            userinfo: UserinfoFacts(status: .answered, claims: ["preferred_username", "sub"]),
            dpop: DPoPFacts(required: false, bound: false, jkt: nil)
        )
        change(&inspection)
        return inspection
    }

    private let signIn = LoginResult(provider: "corp", session: "authgate-provider-test", state: .authenticated, expiresAt: Date(), subject: "1")
    private let revoked = LogoutResult(removed: true, revocation: RevocationReport(.revoked))

    private func outcomes(_ report: ProviderTestReport) -> [String: ProviderTestReport.Check.Outcome] {
        Dictionary(uniqueKeysWithValues: report.checks.map { ($0.name, $0.outcome) })
    }

    @Test("claims from the ID token and userinfo together; a refresh token reused is said so; a token that never expires passes as never")
    func passing() {
        let report = ProviderTestReport(signIn: signIn, inspection: inspection { $0.accessTokenLifetimeSeconds = nil }, signOut: revoked)
        #expect(report.passed && outcomes(report).values.allSatisfy { $0 == .pass || $0 == .skip })
        #expect(report.checks.first { $0.name == "refresh" }?.detail.contains("not rotated (reused)") == true)
        #expect(report.checks.first { $0.name == "access_token_lifetime" }?.detail.hasPrefix("never expires") == true)
        #expect(report.checks.first { $0.name == "claims" }?.detail.contains("(ID token and userinfo)") == true)
        let neverExpiresNoRefresh = ProviderTestReport(
            signIn: signIn,
            inspection: inspection {
                $0.accessTokenLifetimeSeconds = nil
                $0.refreshToken = false
                $0.refresh = RefreshFacts(status: .notPossible)
            },
            signOut: revoked
        )
        #expect(outcomes(neverExpiresNoRefresh)["refresh_token"] == .pass && neverExpiresNoRefresh.passed)
    }

    @Test(
        "what the daemon handles is a warning that says what it means, never a failure: a 60 s token, no refresh token, a claim missing, a scope not granted"
    )
    func warnings() {
        let report = ProviderTestReport(
            signIn: signIn,
            inspection: inspection {
                $0.accessTokenLifetimeSeconds = 60
                $0.refreshToken = false
                $0.refresh = RefreshFacts(status: .notPossible)
                $0.scopesGranted = ["openid"]
                $0.userinfo = nil
            },
            signOut: revoked
        )
        #expect(report.passed, "warnings do not fail the test")
        #expect(
            outcomes(report) == [
                "sign_in": .pass, "id_token": .pass, "claims": .warn, "scopes": .warn, "access_token_lifetime": .warn, "refresh_token": .warn,
                "refresh": .skip, "userinfo": .skip, "revocation": .pass, "dpop": .skip,
            ]
        )
        let details = Dictionary(uniqueKeysWithValues: report.checks.map { ($0.name, $0.detail) })
        #expect(details["access_token_lifetime"]?.hasPrefix("60 s: short; the daemon refreshes it ahead of its expiry") == true, "\(details)")
        #expect(details["access_token_lifetime"]?.contains("younger than half its lifetime") == true)
        #expect(details["refresh_token"]?.contains("lasts as long as its access token (60 s), then the user signs in again") == true)
        #expect(details["scopes"]?.contains("not granted email; an API that needs them will refuse the tokens") == true, "\(details)")
        #expect(details["claims"]?.hasPrefix("missing from the ID token: preferred_username") == true)
        // 61 s is above what the helpers ask: no warning.
        let longer = ProviderTestReport(signIn: signIn, inspection: inspection { $0.accessTokenLifetimeSeconds = 61 }, signOut: revoked)
        #expect(outcomes(longer)["access_token_lifetime"] == .pass)
    }

    @Test(
        "each failure, something a user needs that does not work: no ID token though openid, a failed refresh, userinfo failing, revocation refused, DPoP asked but Bearer"
    )
    func failing() {
        let problem = InspectionProblem(reason: .loginRequired, message: "The provider refused the refresh token.")
        let report = ProviderTestReport(
            signIn: signIn,
            inspection: inspection {
                $0.idToken = nil
                $0.userinfo = UserinfoFacts(status: .failed, error: InspectionProblem(reason: .serviceUnavailable, message: "userinfo answered 503."))
                $0.scopesGranted = ["openid"]
                $0.accessTokenLifetimeSeconds = 30
                $0.refresh = RefreshFacts(status: .failed, error: problem)
                $0.dpop = DPoPFacts(required: true, bound: false, jkt: nil)
            },
            signOut: LogoutResult(removed: true, revocation: RevocationReport(.refused(status: 400)))
        )
        #expect(!report.passed)
        #expect(
            outcomes(report) == [
                "sign_in": .pass, "id_token": .fail, "claims": .skip, "scopes": .warn, "access_token_lifetime": .warn, "refresh_token": .pass,
                "refresh": .fail, "userinfo": .fail, "revocation": .fail, "dpop": .fail,
            ]
        )
        let details = Dictionary(uniqueKeysWithValues: report.checks.map { ($0.name, $0.detail) })
        #expect(details["scopes"]?.contains("not granted email;") == true)
        #expect(details["refresh"]?.contains("[login_required]") == true)
        #expect(details["revocation"]?.contains("HTTP 400") == true)
        let missing = ProviderTestReport(signIn: signIn, inspection: inspection { $0.userinfo = nil }, signOut: nil)
        #expect(
            missing.checks.first { $0.name == "claims" }?.detail
                == "missing from the ID token: preferred_username (ask the scopes profile and email?); the daemon works without them, programs that read them find none"
        )
        #expect(missing.kept && outcomes(missing)["revocation"] == .skip)
    }

    @Test("the --json shape: stable names, outcomes pass/warn/fail/skip, and no more members than documented")
    func jsonShape() throws {
        let report = ProviderTestReport(signIn: signIn, inspection: inspection(), signOut: revoked)
        let object = try #require(try JSONSerialization.jsonObject(with: try RPCCoding.makeEncoder().encode(report)) as? [String: Any])
        #expect(Set(object.keys) == ["provider", "session", "grant", "passed", "kept", "checks"])
        let checks = try #require(object["checks"] as? [[String: Any]])
        #expect(checks.allSatisfy { Set($0.keys) == ["name", "outcome", "detail"] })
        #expect(
            checks.map { $0["name"] as? String ?? "" } == [
                "sign_in", "id_token", "claims", "scopes", "access_token_lifetime", "refresh_token", "refresh", "userinfo", "revocation", "dpop",
            ]
        )
    }

    @Test("for a person: a line per check with its mark and label, then the verdict")
    func text() {
        let report = ProviderTestReport(signIn: signIn, inspection: inspection { $0.accessTokenLifetimeSeconds = nil }, signOut: revoked)
        let lines = report.text.split(separator: "\n").map(String.init)
        #expect(lines.count == report.checks.count + 1)
        #expect(lines.first?.hasPrefix("✓ sign-in") == true, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("✓ forced refresh") })
        #expect(lines.last == "corp: every check passed.")
    }
}
