import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// The provider-file keys for the big providers' documented departures from the RFCs
/// (docs/CONFIGURATION.md, "Provider quirks"), each against the fault-injecting provider
/// (Tests/idp/faulty.py) made to behave as that provider's documentation says.
@Suite("Provider quirks", .serialized)
struct ProviderQuirkTests {
    private static func remote(_ server: LoopbackServer, issuer: String? = nil, grants: [String], scopes: [String], extra: String = "") -> String {
        #"""
        {"type": "oidc", "issuer": "\#(issuer ?? server.issuer)", "client_id": "authgate", "grants": \#(grants), "scopes": \#(scopes),
         "tls": {"ca_file": "\#(server.caFile)"}, "endpoints": {"device_authorization": "\#(server.issuer)/device"}\#(extra)}
        """#
    }

    private static func signIn(_ connection: RPCConnection, _ provider: String) throws -> [String: Any] {
        try call(connection, "login", ["provider": provider, "username": "alice", "password": "alice-password-1"])
    }

    private static func date(_ value: Any?) -> Date? {
        (value as? String).flatMap { ISO8601DateFormatter().date(from: $0) }
    }

    /// GitHub's OAuth app tokens carry no expires_in and never expire:
    /// https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps
    /// ("Response": access_token, scope, token_type only).
    @Test("expires_in_default: a token without expires_in lives the file's seconds, or forever with \"never\"; one hour without the key")
    func missingExpiresIn() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "no_expires_in")
        let daemon = try DaemonProcess(providers: [
            "short.json": Self.remote(server, grants: ["password"], scopes: ["profile"], extra: #", "expires_in_default": 120"#),
            "never.json": Self.remote(server, grants: ["password"], scopes: ["profile"], extra: #", "expires_in_default": "never""#),
            "plain.json": Self.remote(server, grants: ["password"], scopes: ["profile"]),
        ])
        try eventually(timeout: .seconds(30)) { try daemon.cli(["providers", "--json"]).stdout.components(separatedBy: #""status":"ready""#).count == 4 }
        let connection = try daemon.connect()
        let started = Date()
        let short = try Self.signIn(connection, "short").object
        let never = try Self.signIn(connection, "never").object
        let plain = try Self.signIn(connection, "plain").object
        let shortExpiry = try #require(Self.date(short["expires_at"]), "\(short)")
        #expect(abs(shortExpiry.timeIntervalSince(started) - 120) < 10)
        let plainExpiry = try #require(Self.date(plain["expires_at"]), "\(plain)")
        #expect(abs(plainExpiry.timeIntervalSince(started) - 3600) < 10)
        let neverExpiry = try #require(Self.date(never["expires_at"]), "\(never)")
        #expect(neverExpiry.timeIntervalSince(started) > 100 * 365 * 86_400, "never expires: \(neverExpiry)")
        // A token that never expires is handed out as it is, without a refresh.
        let before = try server.tokenRequests()
        let token = try call(connection, "token", ["provider": "never", "min_valid_seconds": 3600])
        #expect(token.result != nil, "\(token)")
        #expect(try server.tokenRequests() == before)
        // People read "never", not the year 4001 the RPC carries.
        let status = try daemon.cli(["status", "never"]).stdout
        #expect(status.contains("never") && !status.contains("4001"), "\(status)")
        let sink = try daemon.cli(["sink", "never", "--file", scratch.path + "/token", "--once"])
        #expect(sink.stderr.contains("the token is valid with no expiry") && !sink.stderr.contains("4001"), "\(sink.stderr)")
    }

    /// GitHub answers device-flow polling errors with HTTP 200:
    /// https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#error-codes-for-the-device-flow
    @Test("token_errors_with_http_200: authorization_pending in a 200 keeps polling; without the key it is a malformed answer")
    func pendingWithHTTP200() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "pending_200")
        let daemon = try DaemonProcess(providers: [
            "github.json": Self.remote(server, grants: ["device_code"], scopes: ["openid"], extra: #", "token_errors_with_http_200": true"#),
            "plain.json": Self.remote(server, grants: ["device_code"], scopes: ["openid"]),
        ])
        try eventually(timeout: .seconds(30)) { try daemon.cli(["providers", "--json"]).stdout.components(separatedBy: #""status":"ready""#).count == 3 }
        let connection = try daemon.connect()

        let plainFlow = try call(connection, "login.begin", ["provider": "plain", "grant": "device_code"]).object["flow_id"] as? String
        let plain = try call(connection, "login.complete", ["flow_id": try #require(plainFlow)])
        #expect(plain.errorReason == "server_error", "\(plain)")
        #expect(plain.errorMessage?.contains("access_token is missing") == true, "\(plain)")

        let before = try server.tokenRequests()
        let flow = try #require(try call(connection, "login.begin", ["provider": "github", "grant": "device_code"]).object["flow_id"] as? String)
        try eventually { try server.tokenRequests() >= before + 1 }
        try server.setMode("ok")
        let reply = try call(connection, "login.complete", ["flow_id": flow])
        #expect(reply.object["state"] as? String == "authenticated", "\(reply)")
        #expect(reply.object["subject"] as? String == "faulty-user")
    }

    /// Microsoft Entra ID's multi-tenant discovery names the issuer
    /// "https://login.microsoftonline.com/{tenantid}/v2.0"; an ID token's iss holds its tid:
    /// https://learn.microsoft.com/en-us/entra/identity-platform/v2-protocols-oidc#find-your-apps-openid-configuration-document-uri
    /// and https://learn.microsoft.com/en-us/entra/identity-platform/id-token-claims-reference
    @Test("issuer_template: the {tenantid} issuer of multi-tenant discovery, filled from the ID token's tid; a file without it is invalid")
    func templatedIssuer() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "entra")
        let organizations = server.issuer + "/organizations/v2.0"
        let daemon = try DaemonProcess(providers: [
            "entra.json": Self.remote(
                server,
                issuer: organizations,
                grants: ["password"],
                scopes: ["openid"],
                extra: #", "issuer_template": "\#(server.issuer)/{tenantid}/v2.0""#
            ),
            "plain.json": Self.remote(server, issuer: organizations, grants: ["password"], scopes: ["openid"]),
        ])
        try eventually(timeout: .seconds(30)) {
            let list = try daemon.cli(["providers", "--json"]).stdout
            return list.contains(#""status":"ready""#) && list.contains(#""status":"invalid""#)
        }
        let list = try daemon.cli(["providers", "--json"]).stdout
        #expect(list.contains("{tenantid}"), "the invalid file's reason names the discovered issuer: \(list)")
        let connection = try daemon.connect()
        let signedIn = try Self.signIn(connection, "entra")
        #expect(signedIn.object["subject"] as? String == "faulty-user", "the ID token was verified: \(signedIn)")

        try server.setMode("entra_wrong_tenant")
        let refused = try Self.signIn(connection, "entra")
        #expect(refused.errorReason == "server_error", "\(refused)")
        #expect(refused.errorMessage?.contains("was issued by") == true, "\(refused)")
    }

    /// Google issues a refresh token only to an authorization request with access_type=offline:
    /// https://developers.google.com/identity/protocols/oauth2/web-server#offline
    @Test("authorization_parameters: access_type=offline and prompt=consent reach the authorization request, and the refresh token comes with them")
    func authorizationParameters() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "offline_only")
        func provider(_ extra: String) -> String {
            #"""
            {"type": "oauth2", "client_id": "authgate", "grants": ["authorization_code"], "scopes": ["email"], "tls": {"ca_file": "\#(server.caFile)"},
             "endpoints": {"authorization": "\#(server.issuer)/authorize", "token": "\#(server.issuer)/token"}\#(extra)}
            """#
        }
        let daemon = try DaemonProcess(providers: [
            "google.json": provider(#", "authorization_parameters": {"access_type": "offline", "prompt": "consent"}"#),
            "plain.json": provider(""),
        ])
        try eventually(timeout: .seconds(30)) { try daemon.cli(["providers", "--json"]).stdout.components(separatedBy: #""status":"ready""#).count == 3 }
        let connection = try daemon.connect()
        for name in ["google", "plain"] {
            let begun = try call(connection, "login.begin", ["provider": name, "grant": "authorization_code"]).object
            let url = try #require(begun["authorization_url"] as? String, "\(begun)")
            #expect(Interactive.query("access_type", of: url) == (name == "google" ? "offline" : nil))
            // The user's browser: the provider redirects at once to the daemon's loopback listener.
            let browser = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "-L", "--noproxy", "*", "--cacert", server.caFile, "-m", "10", url])
            #expect(browser.status == 0, "\(browser.stderr)")
            let reply = try call(connection, "login.complete", ["flow_id": begun["flow_id"] as? String ?? ""])
            #expect(reply.object["state"] as? String == "authenticated", "\(name): \(reply)")
            let request = try server.stats()["last_authorization_request"] as? [String: Any]
            #expect(request?["access_type"] as? String == (name == "google" ? "offline" : nil))
            #expect(request?["prompt"] as? String == (name == "google" ? "consent" : nil))
            // Forced: refreshed with the refresh token when there is one; without, the current
            // token is served and the provider never asked.
            let before = try server.tokenRequests()
            let refreshed = try call(connection, "token", ["provider": name, "force_refresh": true])
            #expect(refreshed.result != nil, "\(refreshed)")
            let lastGrant = (try server.stats()["last_token_request"] as? [String: Any])?["grant_type"] as? String
            if name == "google" {
                #expect(try server.tokenRequests() == before + 1 && lastGrant == "refresh_token", "a refresh token came with access_type=offline")
            } else {
                #expect(try server.tokenRequests() == before && lastGrant == "authorization_code", "no refresh token without access_type=offline")
            }
        }
    }

    /// GitHub's user endpoint names the user with id and login, and has no sub:
    /// https://docs.github.com/en/rest/users/users#get-the-authenticated-user
    @Test("userinfo_claims: GitHub's /user (id, login, no sub) names the user at sign-in and answers userinfo; without the key it has no sub and is refused")
    func userinfoClaims() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "no_expires_in")
        func github(_ extra: String) -> String {
            #"""
            {"type": "oauth2", "client_id": "authgate", "grants": ["password"], "scopes": ["read:user"], "tls": {"ca_file": "\#(server.caFile)"},
             "endpoints": {"token": "\#(server.issuer)/token", "userinfo": "\#(server.issuer)/user"}, "expires_in_default": "never"\#(extra)}
            """#
        }
        let daemon = try DaemonProcess(providers: [
            "github.json": github(#", "userinfo_claims": {"sub": "id", "preferred_username": "login"}"#),
            "plain.json": github(""),
        ])
        try eventually(timeout: .seconds(30)) { try daemon.cli(["providers", "--json"]).stdout.components(separatedBy: #""status":"ready""#).count == 3 }
        let connection = try daemon.connect()
        let signedIn = try Self.signIn(connection, "github").object
        #expect(signedIn["subject"] as? String == "583231" && signedIn["display_name"] as? String == "octocat", "\(signedIn)")
        let claims = try call(connection, "userinfo", ["provider": "github"]).object
        #expect(claims["sub"] as? String == "583231" && claims["preferred_username"] as? String == "octocat" && claims["login"] as? String == "octocat")
        #expect(try daemon.cli(["status", "--json"]).stdout.contains(#""subject":"583231""#))

        let plain = try Self.signIn(connection, "plain").object
        #expect(plain["subject"] == nil, "\(plain)")
        let refused = try call(connection, "userinfo", ["provider": "plain"])
        #expect(refused.errorReason == "server_error" && refused.errorMessage?.contains("with a sub") == true, "\(refused)")
    }
}
