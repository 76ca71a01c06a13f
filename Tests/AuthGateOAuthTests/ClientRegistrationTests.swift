import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateOAuth

private let endpoint = URL(string: "https://sso.example.test/register")!
private let metadata = ClientMetadata(
    redirectURIs: ["http://127.0.0.1/callback"],
    grantTypes: ["authorization_code", "refresh_token"],
    tokenEndpointAuthMethod: "none",
    clientName: "authgate (corp)",
    scope: "openid email"
)

private func json(_ status: Int, _ body: String) -> HTTPResponse {
    HTTPResponse(status: status, headers: ["content-type": "application/json"], body: Array(body.utf8))
}

private func refusal(_ response: HTTPResponse, withInitialAccessToken: Bool = false) -> AuthGateError? {
    do {
        _ = try ClientRegistration.parse(response, provider: "sso.example.test", withInitialAccessToken: withInitialAccessToken)
        return nil
    } catch {
        return error
    }
}

/// RFC 7591 registration requests and responses and the RFC 7592 delete, in process.
@Suite("Dynamic client registration (RFC 7591/7592), in process")
struct ClientRegistrationTests {
    @Test("the request: a JSON POST of the RFC 7591 §2 metadata, the initial access token as Bearer only when given; the response's §3.2.1 fields read")
    func requestAndResponse() async throws {
        let transport = ScriptedTransport([
            json(
                201,
                #"""
                {"client_id": "c-1", "client_secret": "s3cret-value", "client_secret_expires_at": 0, "client_id_issued_at": 1795660127,
                 "registration_client_uri": "https://sso.example.test/register/c-1", "registration_access_token": "rat-value",
                 "grant_types": ["authorization_code"], "redirect_uris": ["http://127.0.0.1/callback"], "token_endpoint_auth_method": "none",
                 "scope": "openid", "application_type": "native"}
                """#
            )
        ])
        let client = try await ClientRegistration.register(
            metadata,
            at: endpoint,
            initialAccessToken: Secret("iat-value"),
            policy: HTTPRequestPolicy(),
            transport: transport
        )
        let request = transport.request(0)
        #expect(request.method == .post && request.url == endpoint && request.endpoint == .registration)
        #expect(transport.header("Content-Type", of: 0) == "application/json" && transport.header("Authorization", of: 0) == "Bearer iat-value")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(body["redirect_uris"] as? [String] == ["http://127.0.0.1/callback"])
        #expect(body["grant_types"] as? [String] == ["authorization_code", "refresh_token"] && body["response_types"] as? [String] == ["code"])
        #expect(body["token_endpoint_auth_method"] as? String == "none" && body["application_type"] as? String == "native")
        #expect(body["client_name"] as? String == "authgate (corp)" && body["scope"] as? String == "openid email" && body.count == 7, "\(body)")

        #expect(client.clientID == "c-1" && client.clientSecret?.exposedValue == "s3cret-value" && client.clientSecretExpiresAt == 0)
        #expect(client.registrationClientURI == "https://sso.example.test/register/c-1" && client.registrationAccessToken?.exposedValue == "rat-value")
        #expect(client.grantTypes == ["authorization_code"] && client.tokenEndpointAuthMethod == "none" && client.scope == "openid")
        #expect(!"\(client)".contains("s3cret-value") && !"\(client)".contains("rat-value"), "secrets print redacted")

        // Without an initial access token there is no Authorization header; a device-only client
        // sends no response_types and no redirect URIs; a private_key_jwt one its jwks.
        let jwks = JSONValue.object(["keys": .array([.object(["kty": .string("EC"), "kid": .string("k-1")])])])
        let plain = ClientRegistration.request(
            ClientMetadata(
                redirectURIs: [],
                grantTypes: ["urn:ietf:params:oauth:grant-type:device_code"],
                tokenEndpointAuthMethod: "private_key_jwt",
                jwks: jwks
            ),
            endpoint: endpoint,
            initialAccessToken: nil
        )
        #expect(!plain.headers.contains { $0.name == "Authorization" })
        let plainBody = try #require(try JSONSerialization.jsonObject(with: Data(plain.body)) as? [String: Any])
        #expect(plainBody["response_types"] == nil && plainBody["redirect_uris"] == nil, "\(plainBody)")
        #expect(((plainBody["jwks"] as? [String: Any])?["keys"] as? [[String: Any]])?.first?["kid"] as? String == "k-1", "\(plainBody)")
        // A public client: no secret, no management URI.
        let publicClient = try ClientRegistration.parse(json(201, #"{"client_id": "p"}"#), provider: "sso", withInitialAccessToken: false)
        #expect(publicClient.clientSecret == nil && publicClient.registrationClientURI == nil && publicClient.grantTypes == nil)
    }

    @Test(
        "a refusal is registration_refused with the provider's error and error_description (RFC 7591 §3.2.2); a missing or refused initial access token says so; never a secret in the message"
    )
    func refusals() throws {
        let refused = try #require(
            refusal(json(400, #"{"error": "invalid_redirect_uri", "error_description": "Custom redirect_uri not allowed"}"#))
        )
        #expect(refused.reason == .registrationRefused)
        #expect(refused.message.contains("invalid_redirect_uri") && refused.message.contains("Custom redirect_uri not allowed"), "\(refused.message)")
        let needsToken = try #require(refusal(json(401, #"{"error": "invalid_token"}"#)))
        #expect(needsToken.reason == .registrationRefused && needsToken.message.contains("demands an initial access token"), "\(needsToken.message)")
        let badToken = try #require(refusal(HTTPResponse(status: 403), withInitialAccessToken: true))
        #expect(badToken.reason == .registrationRefused && badToken.message.contains("refused the initial access token"), "\(badToken.message)")
        #expect(refusal(json(503, "{}"))?.reason == .serviceUnavailable)
        #expect(refusal(HTTPResponse(status: 400, headers: ["content-type": "text/html"], body: Array("<html>".utf8)))?.reason == .serverError)
        #expect(refusal(HTTPResponse(status: 302))?.reason == .serverError)
    }

    @Test("a malformed answer is server_error and names the field: not JSON, no client_id, a wrong type, half of the RFC 7592 pair; the body is never quoted")
    func malformed() throws {
        let cases: [(String, String)] = [
            ("not json s3cret-value", "not a JSON object"),
            (#"{"client_secret": "s3cret-value"}"#, "client_id is missing"),
            (#"{"client_id": 7}"#, "client_id is not a non-empty string"),
            (#"{"client_id": "c", "grant_types": "authorization_code"}"#, "grant_types is not an array of strings"),
            (#"{"client_id": "c", "client_secret_expires_at": "never"}"#, "client_secret_expires_at is not a time"),
            (#"{"client_id": "c", "registration_access_token": "rat-value"}"#, "must come together"),
            (#"{"client_id": "c", "registration_client_uri": "ftp://x", "registration_access_token": "rat-value"}"#, "registration_client_uri is not a URL"),
        ]
        for (body, detail) in cases {
            let error = try #require(refusal(json(201, body)), "\(body)")
            #expect(error.reason == .serverError && error.message.contains(detail), "\(body): \(error.message)")
            #expect(!error.message.contains("s3cret-value") && !error.message.contains("rat-value"), "\(error.message)")
        }
    }

    @Test(
        "the RFC 7592 §2.3 delete: DELETE with the registration access token; 204 and gone are done, 401/403/405 registration_refused, 5xx service_unavailable"
    )
    func delete() async throws {
        let uri = URL(string: "https://sso.example.test/register/c-1")!
        for (status, reason) in [
            (204, nil), (200, nil), (404, nil), (410, nil), (401, ErrorReason.registrationRefused), (403, .registrationRefused), (405, .registrationRefused),
            (503, .serviceUnavailable),
        ] {
            let transport = ScriptedTransport([HTTPResponse(status: status)])
            var failure: AuthGateError?
            do {
                try await ClientRegistration.delete(clientURI: uri, accessToken: Secret("rat-value"), policy: HTTPRequestPolicy(), transport: transport)
            } catch {
                failure = error
            }
            #expect(failure?.reason == reason, "HTTP \(status): \(String(describing: failure))")
            #expect(failure.map { !$0.message.contains("rat-value") } ?? true)
            #expect(transport.request(0).method == .delete && transport.request(0).url == uri && transport.header("Authorization", of: 0) == "Bearer rat-value")
        }
    }
}
