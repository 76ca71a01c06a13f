import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate provider test`: the built CLI signs in through the built daemon at a real
/// provider, the daemon's `session.inspect` reports, and the session is signed out.
@Suite("authgate provider test against real providers")
struct ProviderTestCommandTests {
    @Test(
        "idpyoidc, browser with DPoP: every check passes (revocation not applicable: no endpoint), --json parsed, exit 0, no session left, no token anywhere"
    )
    func idpyAllPass() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let provider = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate-dpop", "grants": ["authorization_code"],
             "scopes": ["openid", "profile", "email"], "tls": {"ca_file": "\#(server.caFile)"}, "dpop": "required"}
            """#
        let daemon = try DaemonProcess(providers: ["corp.json": provider])
        try daemon.waitForLog("provider ready")
        let cli = try daemon.backgroundCLI(["provider", "test", "corp", "--json", "--no-browser"])
        try Interactive.approveInBrowser(cli, server)
        #expect(try cli.waitForExit() == 0, "\(cli.stdout)\n\(cli.stderr)")
        let report = try JSONDecoder().decode(ProviderTestReport.self, from: Data(cli.stdout.utf8))
        let outcomes = Dictionary(uniqueKeysWithValues: report.checks.map { ($0.name, $0.outcome) })
        #expect(
            outcomes == [
                "sign_in": .pass, "id_token": .pass, "claims": .pass, "scopes": .pass, "access_token_lifetime": .pass, "refresh_token": .pass,
                "refresh": .pass, "userinfo": .pass, "revocation": .skip, "dpop": .pass,
            ],
            "\(cli.stdout)"
        )
        #expect(report.passed && !report.kept && report.session == "authgate-provider-test" && report.grant == .authorizationCode)
        let details = Dictionary(uniqueKeysWithValues: report.checks.map { ($0.name, $0.detail) })
        #expect(details["id_token"]?.contains("alg RS256") == true && details["id_token"]?.contains("aud authgate-dpop") == true, "\(details)")
        #expect(details["refresh"]?.contains("was rotated") == true, "idpyoidc rotates refresh tokens: \(details)")
        #expect(details["revocation"]?.contains("no revocation endpoint") == true)
        #expect(try server.idpyStats()["last_token_request"].map { "\($0)" }?.contains("refresh_token") == true, "the forced refresh reached the server")
        // Nothing left behind, and no token (idpyoidc's are JWTs: "eyJ…") in any output or log.
        #expect(!(try daemon.cli(["status", "--json"]).stdout.contains("authgate-provider-test")))
        try daemon.waitForLog("signed out", timeout: .seconds(10))
        #expect(!(cli.stdout + cli.stderr + daemon.logText).contains("eyJ"))
    }

    @Test(
        "60 s tokens without refresh tokens (offline_only, no access_type): ! warnings saying what they mean, exit 0, --keep keeps the session; without --keep the session is revoked and gone; a refused forced refresh is ✗, exit 9"
    )
    func warningsAndFailures() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "offline_only", expiresIn: 60)
        let provider = #"""
            {"type": "oauth2", "client_id": "authgate", "grants": ["authorization_code"], "scopes": ["email"], "tls": {"ca_file": "\#(server.caFile)"},
             "endpoints": {"authorization": "\#(server.issuer)/authorize", "token": "\#(server.issuer)/token",
                           "userinfo": "\#(server.issuer)/userinfo", "revocation": "\#(server.issuer)/revoke"}}
            """#
        let daemon = try DaemonProcess(providers: ["google.json": provider])
        try daemon.waitForLog("provider ready")

        let kept = try daemon.backgroundCLI(["provider", "test", "google", "--keep", "--no-browser"])
        try Interactive.approveInBrowser(kept, server)
        #expect(try kept.waitForExit() == 0, "\(kept.stdout)\n\(kept.stderr)")
        let lines = kept.stdout.split(separator: "\n").map(String.init)
        #expect(!kept.stdout.contains("✗"), "\(kept.stdout)")
        #expect(
            lines.contains { $0.hasPrefix("! access token lifetime  60 s: short;") && $0.contains("a token younger than half its lifetime") },
            "\(kept.stdout)"
        )
        #expect(lines.contains { $0.hasPrefix("! refresh token") && $0.contains("none issued: each sign-in lasts as long as its access token (60 s)") })
        #expect(lines.contains { $0.hasPrefix("– forced refresh") && $0.contains("no refresh token") })
        #expect(lines.contains { $0.hasPrefix("– ID token") && $0.contains("not an OpenID Connect sign-in") })
        #expect(lines.contains { $0.hasPrefix("✓ claims") && $0.contains("(userinfo)") })
        #expect(lines.contains { $0.hasPrefix("✓ userinfo") && $0.contains("preferred_username") })
        #expect(lines.contains { $0.hasPrefix("– revocation") && $0.contains("--keep") })
        #expect(lines.last == "google: no check failed; 2 warnings.", "\(kept.stdout)")
        #expect(try daemon.cli(["status", "--json"]).stdout.contains(#""session":"authgate-provider-test""#))
        #expect(try server.stats()["requests"].map { "\($0)" }?.contains("POST /revoke") != true, "a kept session is not revoked")

        // An hour's tokens with refresh tokens: nothing to warn of.
        try server.setMode("ok", expiresIn: 3600)
        let signedOut = try daemon.backgroundCLI(["provider", "test", "google", "--no-browser"])
        try Interactive.approveInBrowser(signedOut, server)
        #expect(try signedOut.waitForExit() == 0, "\(signedOut.stderr)")
        #expect(signedOut.stdout.contains("✓ revocation"), "\(signedOut.stdout)")
        #expect(signedOut.stdout.hasSuffix("google: every check passed.\n"), "\(signedOut.stdout)")
        #expect(!(try daemon.cli(["status", "--json"]).stdout.contains("authgate-provider-test")))
        // Refresh tokens the provider refuses: the session cannot be kept, which users need.
        try server.setMode("refresh_refused")
        let refused = try daemon.backgroundCLI(["provider", "test", "google", "--no-browser"])
        try Interactive.approveInBrowser(refused, server)
        #expect(try refused.waitForExit() == 9, "\(refused.stderr)")
        let refusedLines = refused.stdout.split(separator: "\n").map(String.init)
        #expect(refusedLines.contains { $0.hasPrefix("✗ forced refresh") && $0.contains("[login_required]") }, "\(refused.stdout)")
        #expect(refusedLines.last?.hasPrefix("google: 2 checks failed.") == true, "the refusal ended the session, so userinfo failed too: \(refused.stdout)")
        // The faulty provider's tokens are faulty-at-N and faulty-rt-N.
        let everything = kept.stdout + kept.stderr + signedOut.stdout + signedOut.stderr + refused.stdout + refused.stderr + daemon.logText
        #expect(!everything.contains("faulty-at-") && !everything.contains("faulty-rt-"))
    }

    @Test(
        "a revocation endpoint named only in the RFC 8414 metadata: provider test revokes there; provider add lists it among the offers and takes --revocation-endpoint; logout says the provider revoked the tokens, or that they were only forgotten here"
    )
    func revocationFromAuthorizationServerMetadata() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "revocation_in_rfc8414")
        let plain = #"""
            {"type": "oauth2", "client_id": "authgate", "grants": ["password"], "tls": {"ca_file": "\#(server.caFile)"},
             "endpoints": {"token": "\#(server.issuer)/token"}}
            """#
        let daemon = try DaemonProcess(providers: [
            "lab.json": faultyProviderFile(server, grants: #"["device_code"]"#, scopes: #"["email"]"#), "plain.json": plain,
        ])
        try daemon.waitForLog("provider ready")
        func revocations() throws -> Int { (try server.stats()["requests"] as? [String: Any])?["POST /revoke"] as? Int ?? 0 }

        // The faulty provider approves a device code at the first poll (its ID tokens need the
        // scope on the token request, which a device code's poll has not: none is asked here).
        let test = try daemon.cli(["provider", "test", "lab", "--device"])
        #expect(test.status == 0, "\(test.stdout)\n\(test.stderr)")
        #expect(test.stdout.contains("✓ revocation             the provider revoked the tokens at sign-out"), "\(test.stdout)")
        #expect(try revocations() == 1)

        let add = try daemon.cli([
            "provider", "add", "labpw", "--providers-dir", daemon.providersDirectory, "--issuer", server.issuer, "--client-id", "authgate",
            "--grant", "password", "--ca-file", server.caFile,
        ])
        #expect(add.status == 0, "\(add.stderr)")
        #expect(add.stdout.contains("  revocation endpoint:     \(server.issuer)/revoke\n"), "\(add.stdout)")
        #expect(add.stdout.contains("labpw is ready"), "\(add.stdout)")
        let manual = try daemon.cli([
            "provider", "add", "manual", "--providers-dir", daemon.providersDirectory, "--issuer", server.issuer, "--client-id", "authgate",
            "--grant", "password", "--ca-file", server.caFile, "--revocation-endpoint", "https://revoke.example.com/revoke", "--dry-run",
        ])
        #expect(manual.status == 0 && manual.stdout.contains(#""revocation" : "https://revoke.example.com/revoke""#), "\(manual.stdout)\(manual.stderr)")

        for provider in ["labpw", "plain"] {
            let login = try daemon.cli(["login", provider, "--username", "alice", "--password-stdin"], stdin: "secret\n")
            #expect(login.status == 0, "\(login.stderr)")
        }
        let revoked = try daemon.cli(["logout", "labpw"])
        #expect(revoked.status == 0 && revoked.stdout == "Signed out of labpw: the provider revoked the tokens.\n", "\(revoked.stdout)\(revoked.stderr)")
        #expect(try revocations() == 2)
        let forgotten = try daemon.cli(["logout", "plain"])
        #expect(
            forgotten.stdout
                == "Signed out of plain: the tokens were only forgotten here (the provider has no revocation endpoint) and stay valid until they expire.\n",
            "\(forgotten.stdout)\(forgotten.stderr)"
        )
        #expect(try revocations() == 2)
        #expect(try daemon.cli(["logout", "plain"]).stdout == "You had no session with plain; nothing to do.\n")
        // The RFC 8414 document's other token endpoint lost to discovery's.
        #expect((try server.stats()["requests"] as? [String: Any])?["POST /not-the-token-endpoint"] == nil)
    }
}
