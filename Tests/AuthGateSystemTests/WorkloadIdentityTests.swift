import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateOAuth

/// The `jti` of the JWT in `file` (the test platform gives each token its own).
private func jti(ofTokenIn file: String) throws -> String {
    let token = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    return try #require(WorkloadTokenFile.claims(of: token)?["jti"]?.stringValue)
}

extension LoopbackServer {
    /// The idpyoidc server's platform issuer: `issuer`, `token_file` (rewritten every 2 s),
    /// `subject`, `audience`.
    var platform: [String: String] { info["platform"] as? [String: String] ?? [:] }

    /// A JWT of the platform issuer, signed, with the lifetime and times asked for.
    func platformToken(lifetime: Int = 600, issuedAgo: Int = 0, notBeforeIn: Int = 0) throws -> String {
        let body = #"{"lifetime": \#(lifetime), "issued_ago": \#(issuedAgo), "not_before_in": \#(notBeforeIn)}"#
        let result = try run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sS", "--fail", "--cacert", caFile, "-H", "Content-Type: application/json", "-d", body, endpoints["platform_token"] ?? ""]
        )
        let answer = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return try #require(answer?["token"] as? String)
    }

    /// The `jti`s of the platform and service-account JWTs the server accepted, in order, as
    /// `client_assertion`, `jwt_bearer` or `subject_token`.
    func accepted(_ use: String) throws -> [String] {
        ((try idpyStats()["federation"] as? [String: Any])?[use] as? [String]) ?? []
    }
}

/// A provider file for the idpyoidc server with no secret, key or certificate: only the CA the
/// test server's TLS needs.
private func workloadProvider(_ server: LoopbackServer, client: String, grants: String, _ keys: String) -> String {
    let file = #"""
        {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "\#(client)", "grants": \#(grants),
         "scopes": ["read"], "tls": {"ca_file": "\#(server.caFile)"}, \#(keys)}
        """#
    for key in ["client_secret_file", "client_key_file", "client_cert_file"] { #expect(!file.contains(key)) }
    return file
}

/// The subject of an access token, from the server's protected resource.
private func resourceSubject(_ server: LoopbackServer, _ token: String) throws -> String? {
    let answer = try server.resource(["Authorization: Bearer \(token)"])
    guard answer.status == "200" else { return nil }
    return (try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])?["sub"] as? String
}

/// The three ways against idpyoidc trusting its own platform issuer, through the daemon as a
/// process: each signs in with only the rotating JWT file, on first use.
@Suite("Workload identity: signing in with only the platform's JWT, against idpyoidc")
struct WorkloadIdentitySignInTests {
    @Test(
        "client_assertion_file: the client-credentials provider signs in on first use with the file's JWT of that moment, and after a rewrite with the new one; an expired, not yet valid or missing file is workload_token_invalid and nothing is sent"
    )
    func clientAssertion() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let tokenFile = try #require(server.platform["token_file"])
        try scratch.write("expired", try server.platformToken(lifetime: 600, issuedAgo: 1200))
        try scratch.write("early", try server.platformToken(notBeforeIn: 600))
        func federated(_ file: String) -> String {
            workloadProvider(
                server,
                client: "authgate-federated",
                grants: #"["client_credentials"]"#,
                #""client_auth": "client_assertion_file", "client_assertion_file": "\#(file)""#
            )
        }
        let daemon = try DaemonProcess(providers: [
            "fed.json": federated(tokenFile), "expired.json": federated(scratch.path + "/expired"),
            "early.json": federated(scratch.path + "/early"), "gone.json": federated(scratch.path + "/gone"),
        ])
        try daemon.waitForLog("provider ready")

        let before = try jti(ofTokenIn: tokenFile)
        let first = try daemon.cli(["token", "fed"])
        let after = try jti(ofTokenIn: tokenFile)
        #expect(first.status == 0, "\(first.stderr)")
        let sent = try server.accepted("client_assertion")
        #expect(sent.count == 1 && [before, after].contains(sent[0]), "the file's JWT when the request went: \(sent) vs \(before), \(after)")
        let token = first.stdout.trimmingCharacters(in: .newlines)
        #expect(try resourceSubject(server, token) == "authgate-federated")

        // The platform rewrites the file; the next sign-in sends the new JWT.
        try eventually { try jti(ofTokenIn: tokenFile) != sent[0] }
        let rotated = try jti(ofTokenIn: tokenFile)
        let again = try daemon.cli(["token", "fed", "--force-refresh"])
        let rotatedLater = try jti(ofTokenIn: tokenFile)
        #expect(again.status == 0 && again.stdout != first.stdout, "\(again.stderr)")
        let resent = try server.accepted("client_assertion")
        #expect(resent.count == 2 && [rotated, rotatedLater].contains(resent[1]), "\(resent)")

        for (provider, why) in [("expired", "expired"), ("early", "not valid for another"), ("gone", "cannot read")] {
            let refused = try daemon.cli(["token", provider])
            #expect(refused.status == 6, "\(refused)")
            #expect(refused.stderr.contains("[workload_token_invalid]") && refused.stderr.contains(why), "\(refused.stderr)")
            #expect(refused.stderr.contains(scratch.path + "/" + provider) && refused.stderr.contains("client_assertion_file"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("authgate login"))
        }
        #expect(try server.accepted("client_assertion").count == 2, "nothing was sent for the bad files")

        // As a unit's ExecStart= runs it at boot: an empty environment but the socket, no
        // terminal, nobody signed in to the session; the command gets the token first use made.
        let unit = try daemon.cli(
            ["exec", "fed", "--session", "unit", "--", "/bin/sh", "-c", #"test -t 0 || printf %s "$AUTHGATE_TOKEN""#],
            prefix: ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "AUTHGATE_SOCKET=\(daemon.socketPath)"]
        )
        #expect(unit.status == 0 && !unit.stdout.isEmpty, "\(unit.stderr)")
        #expect(try resourceSubject(server, unit.stdout) == "authgate-federated")
        #expect(try server.accepted("client_assertion").count == 3)
        for secret in [token, again.stdout.trimmingCharacters(in: .newlines), try String(contentsOfFile: tokenFile, encoding: .utf8)] {
            #expect(!daemon.logText.contains(secret))
        }
    }

    @Test(
        "jwt_bearer: the platform's JWT from assertion_file, and assertions signed with a service account's assertion_key_file (a fresh jti each); authgate login asks for no user name"
    )
    func jwtBearer() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let tokenFile = try #require(server.platform["token_file"])
        let account = try #require(server.info["service_account"] as? [String: String])
        let daemon = try DaemonProcess(providers: [
            "platform.json": workloadProvider(server, client: "authgate-workload", grants: #"["jwt_bearer"]"#, #""assertion_file": "\#(tokenFile)""#),
            "account.json": #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate-workload", "grants": ["jwt_bearer"],
             "scopes": ["read"], "tls": {"ca_file": "\#(server.caFile)"}, "assertion_key_file": "\#(account["key_file"] ?? "")",
             "assertion_key_id": "\#(account["key_id"] ?? "")", "assertion_issuer": "\#(account["issuer"] ?? "")"}
            """#,
        ])
        try daemon.waitForLog("provider ready")

        let login = try daemon.cli(["login", "platform"])
        #expect(login.status == 0 && login.stdout.contains("Signed in to platform"), "\(login)")
        let token = try daemon.cli(["token", "platform"])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(try resourceSubject(server, token.stdout.trimmingCharacters(in: .newlines)) == server.platform["subject"])
        // The login's sign-in: the platform's JWT (its jti one the platform wrote).
        let sent = try server.accepted("jwt_bearer")
        #expect(sent.count == 1, "\(sent)")
        let before = try jti(ofTokenIn: tokenFile)
        #expect(try daemon.cli(["token", "platform", "--force-refresh"]).status == 0)
        let after = try jti(ofTokenIn: tokenFile)
        let resent = try server.accepted("jwt_bearer")
        #expect(resent.count == 2 && [before, after].contains(resent[1]), "the file's JWT of that moment: \(resent)")

        let signed = try daemon.cli(["token", "account"])
        #expect(signed.status == 0, "\(signed.stderr)")
        #expect(try resourceSubject(server, signed.stdout.trimmingCharacters(in: .newlines)) == account["issuer"])
        let resigned = try daemon.cli(["token", "account", "--force-refresh"])
        #expect(resigned.status == 0, "a second assertion, its own jti (the server refuses one used twice): \(resigned.stderr)")
        let assertions = try server.accepted("jwt_bearer")
        #expect(assertions.count == 4 && Set(assertions.suffix(2)).count == 2, "\(assertions)")
        // Each session is named by the identity it signed in as.
        let status = try daemon.cli(["status", "--json"]).stdout
        #expect(status.contains(#""subject":"\#(server.platform["subject"] ?? "")""#), "\(status)")
        #expect(status.contains(#""subject":"\#(account["issuer"] ?? "")""#), "\(status)")
    }

    @Test("token_exchange: the platform's JWT exchanged on first use; once the platform rewrites the file the daemon exchanges the new one by itself")
    func tokenExchange() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let tokenFile = try #require(server.platform["token_file"])
        let daemon = try DaemonProcess(providers: [
            "ex.json": workloadProvider(
                server,
                client: "authgate-workload",
                grants: #"["token_exchange"]"#,
                #""subject_token_file": "\#(tokenFile)", "subject_token_type": "urn:ietf:params:oauth:token-type:jwt""#
            )
        ])
        try daemon.waitForLog("provider ready")
        let before = try jti(ofTokenIn: tokenFile)
        let first = try daemon.cli(["token", "ex"])
        let after = try jti(ofTokenIn: tokenFile)
        #expect(first.status == 0, "\(first.stderr)")
        let token = first.stdout.trimmingCharacters(in: .newlines)
        #expect(try resourceSubject(server, token) == server.platform["subject"])
        let exchanged = try server.accepted("subject_token")
        #expect(exchanged.count == 1 && [before, after].contains(exchanged[0]), "\(exchanged)")

        // No caller asks: the rotation alone makes the daemon exchange again.
        try eventually(timeout: .seconds(20)) { try server.accepted("subject_token").count >= 2 }
        try daemon.waitForLog("platform token rotated")
        let renewed = try daemon.cli(["token", "ex"]).stdout.trimmingCharacters(in: .newlines)
        #expect(!renewed.isEmpty && renewed != token)
        let again = try server.accepted("subject_token")
        #expect(again[1] != again[0])
        #expect(!daemon.logText.contains(token) && !daemon.logText.contains(renewed))
    }
}
