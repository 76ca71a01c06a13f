import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension LoopbackServer {
    /// The idpyoidc authorization server (Tests/idp/idpy_server.py): DPoP, private_key_jwt,
    /// client_secret_jwt, mutual TLS (with `mtls`), PAR and token exchange.
    static func idpy(workdir: String, mtls: Bool = false, accessTokenLifetime: Int = 3600) throws -> LoopbackServer {
        try LoopbackServer(
            script: "idpy_server.py",
            workdir: workdir,
            arguments: ["--access-token-lifetime", "\(accessTokenLifetime)"] + (mtls ? ["--mtls"] : [])
        )
    }

    /// What the idpyoidc server knows of `client`: its files and key id.
    func client(_ id: String) -> [String: Any] {
        (info["clients"] as? [String: Any])?[id] as? [String: Any] ?? [:]
    }

    /// Switches the idpyoidc server's mode (require-nonce, nonce-always, refuse-dpop, par-fail, …).
    func setIdpyMode(_ mode: String) throws {
        let result = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--fail", "--cacert", caFile, "-d", "mode=\(mode)", issuer + "/test/mode"])
        guard result.status == 0 else { throw TestFailure("could not set mode \(mode): \(result.stderr)") }
    }

    /// The idpyoidc server's statistics (see idpy_server.py).
    func idpyStats() throws -> [String: Any] {
        let result = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--cacert", caFile, issuer + "/test/stats"])
        return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
    }

    /// GET of the server's protected resource with `headers`: the HTTP status and body.
    func resource(_ headers: [String], url: String? = nil) throws -> (status: String, body: String) {
        let result = try run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sS", "--cacert", caFile, "-w", "\n%{http_code}"] + headers.flatMap { ["-H", $0] } + [url ?? endpoints["resource"] ?? ""]
        )
        var lines = result.stdout.components(separatedBy: "\n")
        let status = lines.popLast() ?? ""
        return (status, lines.joined(separator: "\n"))
    }
}

/// A provider file for the idpyoidc server's `client`.
func idpyProvider(_ server: LoopbackServer, client: String, grants: [String], extra: String = "") -> String {
    #"""
    {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "\#(client)", "grants": \#(grants),
     "scopes": ["openid", "read"], "tls": {"ca_file": "\#(server.caFile)"}\#(extra)}
    """#
}

/// DPoP, private_key_jwt, client_secret_jwt, mutual TLS, PAR and token exchange through the
/// daemon as a process, against idpyoidc 5.0.0 on loopback over TLS (Tests/idp/idpy_server.py).
@Suite("Sender-constrained and secretless: against idpyoidc", .serialized)
struct ModernOAuthTests {
    @Test(
        "DPoP: the session's tokens are bound to a key only the daemon holds; the resource takes its proofs and refuses the token without one or with a proof for another URL; refresh and restart keep the key"
    )
    func dpop() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let provider = idpyProvider(server, client: "authgate-dpop", grants: ["password"], extra: #", "dpop": "required", "storage": "persistent""#)
        var daemon = try DaemonProcess(providers: ["corp.json": provider])
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")

        let result = try daemon.cli(["token", "corp", "--json"])
        #expect(result.stdout.contains(#""token_type":"DPoP""#), "\(result.stdout)")
        let token = try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .newlines)
        let status = try daemon.cli(["status", "--json"]).stdout
        let jkt = try #require(status.components(separatedBy: #""dpop_jkt":""#).dropFirst().first?.prefix { $0 != "\"" }).description
        #expect(jkt.count == 43, "a SHA-256 thumbprint, base64url: \(status)")
        #expect(try server.idpyStats()["last_token_request"].map { "\($0)" }?.contains(jkt) == true, "the server bound the token to that key")

        // What a program does: the two headers, for this request.
        let resource = try #require(server.endpoints["resource"])
        let headers = try daemon.cli(["token", "corp", "--header", "--url", resource])
        #expect(headers.status == 0, "\(headers.stderr)")
        let lines = headers.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0] == "Authorization: DPoP \(token)" && lines[1].hasPrefix("DPoP: "), "\(headers.stdout)")
        let accepted = try server.resource(lines)
        #expect(accepted.status == "200" && accepted.body.contains(jkt), "\(accepted)")
        // The token alone is worth nothing: as Bearer, or with a proof for another URL.
        #expect(try server.resource(["Authorization: Bearer \(token)"]).status == "401")
        #expect(try server.resource(["Authorization: DPoP \(token)"]).status == "401")
        let elsewhere = try daemon.cli(["dpop-proof", "corp", "--url", server.issuer + "/other"]).stdout.trimmingCharacters(in: .newlines)
        #expect(try server.resource(["Authorization: DPoP \(token)", "DPoP: \(elsewhere)"]).status == "401")
        let fresh = try daemon.cli(["dpop-proof", "corp", "--method", "get", "--url", resource]).stdout.trimmingCharacters(in: .newlines)
        #expect(try server.resource(["Authorization: DPoP \(token)", "DPoP: \(fresh)"]).status == "200")
        #expect(try daemon.cli(["token", "corp", "--header"]).status == 5, "a DPoP header needs the URL")

        // A refresh is proven with the same key (the server binds the refresh token to it).
        let refreshed = try daemon.cli(["token", "corp", "--force-refresh"]).stdout.trimmingCharacters(in: .newlines)
        #expect(!refreshed.isEmpty && refreshed != token)
        let afterRefresh = try daemon.cli(["token", "corp", "--header", "--url", resource]).stdout.split(separator: "\n").map(String.init)
        #expect(try server.resource(afterRefresh).status == "200")

        // The key was sealed with the session: after a restart, the same key signs.
        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        daemon = try DaemonProcess(providers: ["corp.json": provider], scratch: daemon.scratch)
        try daemon.waitForLog("sessions.restored=1", timeout: .seconds(10))
        #expect(try daemon.cli(["status", "--json"]).stdout.contains(jkt))
        let restored = try daemon.cli(["token", "corp", "--header", "--url", resource]).stdout.split(separator: "\n").map(String.init)
        #expect(try server.resource(restored).status == "200", "\(restored)")

        for secret in ["alice-password-1", token, refreshed] {
            #expect(!daemon.logText.contains(secret))
        }
    }

    @Test("DPoP nonces: a demanded nonce is sent on the one retry; a nonce demanded twice, or a refused proof, is dpop_rejected")
    func dpopNonces() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: [
            "corp.json": idpyProvider(server, client: "authgate-dpop", grants: ["password"], extra: #", "dpop": "required""#)
        ])
        try daemon.waitForLog("provider ready")
        func login(_ session: String) throws -> ProcessOutput {
            try daemon.cli(["login", "corp", "--session", session, "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        }
        try server.setIdpyMode("require-nonce")
        let withNonce = try login("one")
        #expect(withNonce.status == 0, "\(withNonce.stderr)")
        #expect(try server.idpyStats()["nonce_challenges"] as? Int ?? 0 >= 1)
        try server.setIdpyMode("nonce-always")
        let twice = try login("two")
        #expect(twice.status == 7 && twice.stderr.contains("[dpop_rejected]") && twice.stderr.contains("twice"), "\(twice.stderr)")
        try server.setIdpyMode("refuse-dpop")
        let refused = try login("three")
        #expect(refused.status == 7 && refused.stderr.contains("invalid_dpop_proof") && refused.stderr.contains("[dpop_rejected]"), "\(refused.stderr)")
    }

    @Test(
        "private_key_jwt (EC P-256 and RSA) and client_secret_jwt: the client signs in with assertions the server verified; a key it does not know is provider_unavailable"
    )
    func clientAssertions() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        func keyed(_ client: String, keyFile: String? = nil) -> String {
            let file = keyFile ?? (server.client(client)["key_file"] as? String ?? "")
            let kid = (server.client(client)["key_id"] as? String).map { #", "client_key_id": "\#($0)""# } ?? ""
            return idpyProvider(
                server,
                client: client,
                grants: ["client_credentials"],
                extra: #", "client_auth": "private_key_jwt", "client_key_file": "\#(file)""# + kid
            )
        }
        let secretFile = server.client("authgate-secretjwt")["secret_file"] as? String ?? ""
        let daemon = try DaemonProcess(providers: [
            "ec.json": keyed("authgate-pkjwt-ec"),
            "rsa.json": keyed("authgate-pkjwt-rsa"),
            "hs.json": idpyProvider(
                server,
                client: "authgate-secretjwt",
                grants: ["client_credentials"],
                extra: #", "client_auth": "client_secret_jwt", "client_secret_file": "\#(secretFile)""#
            ),
            "wrong.json": keyed("authgate-pkjwt-ec", keyFile: server.client("authgate-pkjwt-rsa")["key_file"] as? String),
        ])
        try daemon.waitForLog("provider ready")
        for (provider, client, method) in [
            ("ec", "authgate-pkjwt-ec", "private_key_jwt"), ("rsa", "authgate-pkjwt-rsa", "private_key_jwt"),
            ("hs", "authgate-secretjwt", "client_secret_jwt"),
        ] {
            let login = try daemon.cli(["login", provider, "--client-credentials"])
            #expect(login.status == 0, "\(provider): \(login.stderr)")
            #expect(((try server.idpyStats()["client_auth"] as? [String: Any])?[client] as? String) == method, "\(provider)")
            #expect(try daemon.cli(["token", provider]).status == 0)
        }
        let wrong = try daemon.cli(["login", "wrong", "--client-credentials"])
        #expect(wrong.status == 6 && wrong.stderr.contains("invalid_client") && wrong.stderr.contains("[provider_unavailable]"), "\(wrong.stderr)")
        let secret = try String(contentsOfFile: secretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!secret.isEmpty && !daemon.logText.contains(secret))
    }

    @Test(
        "mutual TLS: tls_client_auth and self_signed_tls_client_auth sign in with the certificate at the mtls_endpoint_aliases; another certificate is refused"
    )
    func mutualTLS() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp", mtls: true)
        func mtls(_ client: String, method: String, certificate: String, key: String) -> String {
            idpyProvider(
                server,
                client: client,
                grants: ["client_credentials"],
                extra: #"""
                    , "client_auth": "\#(method)", "tls": {"ca_file": "\#(server.caFile)", "client_cert_file": "\#(certificate)", "client_key_file": "\#(key)"}
                    """#
            ).replacing(#""tls": {"ca_file": "\#(server.caFile)"},"#, with: "")
        }
        let caSigned = (server.info["client_cert_file"] as? String ?? "", server.info["client_key_file"] as? String ?? "")
        let selfSigned = (server.client("authgate-mtls-self")["cert_file"] as? String ?? "", server.client("authgate-mtls-self")["key_file"] as? String ?? "")
        let daemon = try DaemonProcess(providers: [
            "ca.json": mtls("authgate-mtls", method: "tls_client_auth", certificate: caSigned.0, key: caSigned.1),
            "self.json": mtls("authgate-mtls-self", method: "self_signed_tls_client_auth", certificate: selfSigned.0, key: selfSigned.1),
            "wrong.json": mtls("authgate-mtls", method: "tls_client_auth", certificate: selfSigned.0, key: selfSigned.1),
        ])
        try daemon.waitForLog("provider ready")
        for provider in ["ca", "self"] {
            let login = try daemon.cli(["login", provider, "--client-credentials"])
            #expect(login.status == 0, "\(provider): \(login.stderr)")
        }
        let requests = try server.idpyStats()["requests"] as? [String: Any] ?? [:]
        #expect(requests["POST /mtls/token"] as? Int ?? 0 >= 2, "the aliases were used: \(requests)")
        #expect(requests["POST /token"] == nil, "\(requests)")
        let wrong = try daemon.cli(["login", "wrong", "--client-credentials"])
        #expect(wrong.status != 0 && wrong.stderr.contains("invalid_client"), "\(wrong.stderr)")
    }

    @Test("PAR: the browser's URL carries only client_id and request_uri, and the sign-in completes; a failing PAR endpoint is service_unavailable")
    func pushedAuthorization() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: ["web.json": idpyProvider(server, client: "authgate-par", grants: ["authorization_code"])])
        try daemon.waitForLog("provider ready")
        let cli = try daemon.backgroundCLI(["login", "web", "--browser", "--no-browser"])
        try cli.waitForOutput("Ctrl-C cancels it")
        let url = try #require(cli.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("https://") })
        #expect(Set(URLComponents(string: url)?.queryItems?.map(\.name) ?? []) == ["client_id", "request_uri"], "\(url)")
        #expect(try server.idpyStats()["par_requests"] as? Int == 1)
        // NoAuthn: the server signs alice in and redirects straight to the daemon's listener.
        let authorize = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--cacert", server.caFile, "-o", "/dev/null", "-w", "%{redirect_url}", url])
        let redirect = authorize.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(redirect.hasPrefix("http://127.0.0.1:"), "\(authorize)")
        #expect(try Interactive.get(redirect).status == 200)
        #expect(try cli.waitForExit() == 0, "\(cli.stderr)")
        #expect(try daemon.cli(["token", "web"]).status == 0)

        try server.setIdpyMode("par-fail")
        let failing = try daemon.cli(["login", "web", "--session", "two", "--browser", "--no-browser"])
        #expect(
            failing.status == 7 && failing.stderr.contains("[service_unavailable]") && failing.stderr.contains("pushed authorization request"),
            "\(failing.stderr)"
        )
    }

    @Test("token exchange: a token for another audience, cached with its issued_token_type; a forbidden audience is validation_failed")
    func tokenExchange() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let secretFile = server.client("authgate-exchange")["secret_file"] as? String ?? ""
        let daemon = try DaemonProcess(providers: [
            "corp.json": idpyProvider(
                server,
                client: "authgate-exchange",
                grants: ["password"],
                extra: #", "client_secret_file": "\#(secretFile)""#
            )
        ])
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let own = try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .newlines)
        let exchanged = try daemon.cli(["token", "corp", "--audience", "https://api.example.test", "--json"])
        #expect(exchanged.status == 0, "\(exchanged.stderr)")
        #expect(exchanged.stdout.contains(#""issued_token_type":"urn:ietf:params:oauth:token-type:access_token""#), "\(exchanged.stdout)")
        #expect(!exchanged.stdout.contains(own))
        let requests = try server.idpyStats()["token_requests"] as? Int ?? 0
        let again = try daemon.cli(["token", "corp", "--audience", "https://api.example.test"]).stdout.trimmingCharacters(in: .newlines)
        #expect(exchanged.stdout.contains(again), "cached per combination")
        #expect(try server.idpyStats()["token_requests"] as? Int == requests, "no second exchange")
        #expect(try server.resource(["Authorization: Bearer \(again)"]).status == "200", "the server takes the exchanged token")
        let forbidden = try daemon.cli(["token", "corp", "--audience", "https://forbidden.example.test"])
        #expect(forbidden.status == 5 && forbidden.stderr.contains("[validation_failed]") && forbidden.stderr.contains("audience"), "\(forbidden.stderr)")
        #expect(!daemon.logText.contains(again) && !daemon.logText.contains(own))
    }
}
