import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateOAuth

/// Every grant through RemoteIdentityProvider against a scripted provider: the request each
/// sends, and what each answer becomes.
@Suite("Grants against a scripted provider")
struct GrantTests {
    @Test("password: grant_type, username, password and the file's scopes, the client in Basic; the tokens read strictly")
    func password() async throws {
        let subject = try ProviderUnderTest.oauth2(transport: ScriptedProvider([.token: [tokens(extra: #","refresh_token":"rt-1","scope":"read""#)]]))
        let signIn = try await subject.provider.signIn(PasswordCredentials(username: "alice", password: Secret("p@ss word")))
        #expect(signIn.tokens.accessToken.exposedValue == "at-1" && signIn.tokens.refreshToken?.exposedValue == "rt-1")
        #expect(signIn.tokens.scopes == ["read"], "the granted scope, not the requested ones")
        #expect(signIn.subject == nil, "no ID token and no userinfo for an oauth2 provider")
        let form = subject.transport.form(.token)
        #expect(form == ["grant_type": "password", "username": "alice", "password": "p@ss word", "scope": "read write"])
        let request = try #require(subject.transport.requests(to: .token).first)
        #expect(request.method == .post && request.url.absoluteString == "https://idp.example.test/token")
        #expect(request.headers.first { $0.name == "Authorization" }?.value == "Basic " + Data("cli:s3cret".utf8).base64EncodedString())
        #expect(request.headers.first { $0.name == "Content-Type" }?.value == "application/x-www-form-urlencoded")
    }

    @Test(
        "password: invalid_grant and a bare 401 are wrong credentials; other refusals keep their own reasons",
        arguments: [
            (oauthError("invalid_grant"), ErrorReason.invalidCredentials), (HTTPResponse(status: 401), .invalidCredentials),
            (oauthError("invalid_client", status: 401), .providerUnavailable), (oauthError("unauthorized_client"), .unsupportedGrant),
            (oauthError("unsupported_grant_type"), .unsupportedGrant), (oauthError("invalid_scope"), .validationFailed),
            (oauthError("access_denied"), .permissionDenied), (oauthError("something_new"), .serverError),
        ] as [(HTTPResponse, ErrorReason)]
    )
    func passwordRefusals(answer: HTTPResponse, reason: ErrorReason) async throws {
        let subject = try ProviderUnderTest.oauth2(transport: ScriptedProvider([.token: [answer]]))
        let error = await #expect(throws: AuthGateError.self) {
            try await subject.provider.signIn(PasswordCredentials(username: "alice", password: Secret("wrong")))
        }
        #expect(error?.reason == reason, "\(error.map { "\($0)" } ?? "")")
    }

    @Test("client credentials: the grant with the file's scopes and the variant's resource; the session's subject is the client")
    func clientCredentials() async throws {
        let subject = try ProviderUnderTest.oauth2(transport: ScriptedProvider([.token: [tokens()]]))
        let signIn = try await subject.provider.signInAsClient(TokenVariant(resource: "https://api.example.test"))
        #expect(signIn.subject == "client:cli" && signIn.tokens.scopes == ["read", "write"], "no scope in the answer: the requested ones")
        #expect(
            subject.transport.form(.token) == ["grant_type": "client_credentials", "scope": "read write", "resource": "https://api.example.test"]
        )
    }

    @Test(
        "a provider's outage is service_unavailable with its Retry-After; a 4xx without an OAuth error is server_error",
        arguments: [
            (HTTPResponse(status: 503, headers: ["retry-after": "30"]), ErrorReason.serviceUnavailable, 30 as Int?),
            (oauthError("temporarily_unavailable", status: 429).withHeader("retry-after", "12"), .serviceUnavailable, 12),
            (HTTPResponse(status: 502, headers: ["content-type": "text/html"], body: Array("<html>".utf8)), .serviceUnavailable, nil),
            (HTTPResponse(status: 500), .serviceUnavailable, nil), (HTTPResponse(status: 404), .serverError, nil),
            (HTTPResponse(status: 401), .providerUnavailable, nil),
        ] as [(HTTPResponse, ErrorReason, Int?)]
    )
    func outages(answer: HTTPResponse, reason: ErrorReason, retryAfter: Int?) async throws {
        let subject = try ProviderUnderTest.oauth2(transport: ScriptedProvider([.token: [answer]]))
        let error = await #expect(throws: AuthGateError.self) { try await subject.provider.signInAsClient(TokenVariant()) }
        #expect(error?.reason == reason && error?.retryAfterSeconds == retryAfter, "\(error.map { "\($0)" } ?? "")")
    }

    @Test(
        "a 200 that is not a token response is server_error naming what is wrong",
        arguments: [
            ("{not json", "not a JSON object"), (#"{"token_type":"Bearer"}"#, "access_token is missing"),
            (#"{"access_token":"a\r\nX-Evil: 1","token_type":"Bearer"}"#, "b64token"),
            (#"{"access_token":"at","token_type":"Bearer","expires_in":-5}"#, "expires_in"),
            (#"{"access_token":"at"}"#, "token_type"), (#"{"access_token":"at","token_type":"Bearer","id_token":"not a jws"}"#, "id_token"),
            (#"["access_token"]"#, "not a JSON object"),
        ]
    )
    func malformedTokenResponses(body: String, detail: String) async throws {
        let subject = try ProviderUnderTest.oauth2(transport: ScriptedProvider([.token: [json(200, body)]]))
        let error = await #expect(throws: AuthGateError.self) { try await subject.provider.signInAsClient(TokenVariant()) }
        #expect(error?.reason == .serverError && error?.message.contains(detail) == true, "\(error.map { "\($0)" } ?? "")")
    }

    @Test("refresh: the refresh token and a variant's scope and resource; invalid_grant and a bare 401 mean signing in again")
    func refresh() async throws {
        let subject = try ProviderUnderTest.oauth2(
            transport: ScriptedProvider([.token: [tokens("at-2"), oauthError("invalid_grant", description: "Token is not active"), HTTPResponse(status: 401)]])
        )
        let refreshed = try await subject.provider.refresh(Secret("rt-1"), variant: TokenVariant(scopes: ["read"], resource: "https://api.example.test"))
        #expect(refreshed.accessToken.exposedValue == "at-2" && refreshed.scopes == ["read"])
        #expect(
            subject.transport.form(.token)
                == ["grant_type": "refresh_token", "refresh_token": "rt-1", "scope": "read", "resource": "https://api.example.test"]
        )
        for _ in 0..<2 {
            let error = await #expect(throws: AuthGateError.self) { try await subject.provider.refresh(Secret("rt-1"), variant: TokenVariant()) }
            #expect(error?.reason == .loginRequired, "\(error.map { "\($0)" } ?? "")")
        }
        #expect(subject.transport.form(.token, 1) == ["grant_type": "refresh_token", "refresh_token": "rt-1"], "no scope: the session's own")
    }

    @Test("device code: the authorization's fields, read strictly; each poll's answer: pending, slow_down, denied, expired, the tokens")
    func deviceCode() async throws {
        let transport = ScriptedProvider([
            .deviceAuthorization: [
                json(
                    200,
                    #"{"device_code":"dc-1","user_code":"WDJB-MJHT","verification_uri":"https://idp.example.test/device","expires_in":600,"interval":2.5}"#
                )
            ],
            .token: [
                oauthError("authorization_pending"), oauthError("slow_down"), oauthError("access_denied"), oauthError("expired_token"),
                HTTPResponse(status: 503), tokens(),
            ],
        ])
        let subject = try ProviderUnderTest.oauth2(transport: transport)
        let authorization = try await subject.provider.beginDeviceAuthorization(scopes: ["read"])
        #expect(authorization.userCode == "WDJB-MJHT" && authorization.deviceCode.exposedValue == "dc-1" && authorization.interval == 3)
        #expect(transport.form(.deviceAuthorization) == ["scope": "read"], "the client is authenticated in Basic, as at the token endpoint")

        func poll() async throws(AuthGateError) -> String {
            switch try await subject.provider.pollDeviceAuthorization(authorization, scopes: ["read"]) {
            case .pending: "pending"
            case .slowDown: "slow_down"
            case .signedIn(let signIn): "signed in \(signIn.tokens.accessToken.exposedValue)"
            }
        }
        #expect(try await poll() == "pending")
        #expect(try await poll() == "slow_down")
        var reasons: [ErrorReason] = []
        for _ in 0..<3 {
            do throws(AuthGateError) {
                _ = try await poll()
            } catch {
                reasons.append(error.reason)
            }
        }
        #expect(reasons == [.permissionDenied, .flowExpired, .serviceUnavailable])
        #expect(try await poll() == "signed in at-1")
        #expect(transport.form(.token) == ["grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": "dc-1"])
    }

    @Test("device code: the polling loop goes on through authorization_pending and an outage, and ends with the tokens")
    func devicePollingLoop() async throws {
        let transport = ScriptedProvider([
            .token: [oauthError("authorization_pending"), HTTPResponse(status: 502), oauthError("authorization_pending"), tokens()]
        ])
        let subject = try ProviderUnderTest.oauth2(transport: transport)
        // Interval 0: the loop's pace is not the point here (backing off from 0 stays 0).
        let authorization = DeviceAuthorization(
            deviceCode: Secret("dc-1"),
            userCode: "ABCD",
            verificationURI: URL(string: "https://idp.example.test/device")!,
            verificationURIComplete: nil,
            expiresAt: Date().addingTimeInterval(600),
            interval: 0
        )
        let outcome = await subject.provider.awaitDeviceAuthorization(authorization, scopes: [])
        guard case .success(let signIn)? = outcome else {
            Issue.record("\(String(describing: outcome))")
            return
        }
        #expect(signIn.tokens.accessToken.exposedValue == "at-1" && transport.requests(to: .token).count == 4)
        #expect(signIn.tokens.scopes == ["read", "write"], "the file's scopes when the call names none")
    }

    @Test(
        "device code: a malformed device authorization answer is refused",
        arguments: [
            #"{"user_code":"A","verification_uri":"https://idp.example.test/d","expires_in":600}"#,
            #"{"device_code":"d","user_code":"A\u001b[2J","verification_uri":"https://idp.example.test/d","expires_in":600}"#,
            #"{"device_code":"d","user_code":"A","verification_uri":"javascript:alert(1)","expires_in":600}"#,
            #"{"device_code":"d","user_code":"A","verification_uri":"https://idp.example.test/d","expires_in":0}"#,
        ]
    )
    func malformedDeviceAuthorization(body: String) async throws {
        let subject = try ProviderUnderTest.oauth2(transport: ScriptedProvider([.deviceAuthorization: [json(200, body)]]))
        let error = await #expect(throws: AuthGateError.self) { try await subject.provider.beginDeviceAuthorization(scopes: []) }
        #expect(error?.reason == .serverError)
    }

    @Test("authorization code: the browser's URL carries PKCE S256, state and the redirect; the code is redeemed with its verifier")
    func authorizationCode() async throws {
        let transport = ScriptedProvider([.token: [tokens(), oauthError("invalid_grant")]])
        let subject = try ProviderUnderTest.oauth2(transport: transport)
        let redirect = URL(string: "http://127.0.0.1:8765/callback")!
        let request = try await subject.provider.authorizationRequest(redirectURI: redirect, scopes: [], prompt: nil)
        let components = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false))
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { first, _ in first }
        #expect(components.host == "idp.example.test" && components.path == "/authorize")
        #expect(query["response_type"] == "code" && query["client_id"] == "cli" && query["redirect_uri"] == redirect.absoluteString)
        #expect(query["scope"] == "read write" && query["state"] == request.state.exposedValue)
        #expect(query["code_challenge_method"] == "S256" && query["code_challenge"] == AuthorizationCodeGrant.codeChallenge(request.codeVerifier))
        #expect(query["code_verifier"] == nil, "the verifier never goes to the browser")

        let foreign = await subject.provider.completeAuthorization(["state": "someone-else", "code": "c-0"], request: request)
        guard case .ignored = foreign else {
            Issue.record("a request without this sign-in's state was used: \(foreign)")
            return
        }
        #expect(transport.requests(to: .token).isEmpty)

        let outcome = await subject.provider.completeAuthorization(["state": request.state.exposedValue, "code": "c-1"], request: request)
        guard case .finished(.success(let signIn)) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(signIn.tokens.accessToken.exposedValue == "at-1")
        #expect(
            transport.form(.token) == [
                "grant_type": "authorization_code", "code": "c-1", "redirect_uri": redirect.absoluteString,
                "code_verifier": request.codeVerifier.exposedValue,
            ]
        )
        let reused = await subject.provider.completeAuthorization(["state": request.state.exposedValue, "code": "c-1"], request: request)
        guard case .finished(.failure(let error)) = reused else {
            Issue.record("\(reused)")
            return
        }
        #expect(error.reason == .loginRequired && error.message.contains("authorization code"))
    }

    @Test(
        "authorization code: an error redirect ends the sign-in with its reason, and nothing is redeemed",
        arguments: [
            ("access_denied", ErrorReason.permissionDenied), ("login_required", .loginRequired), ("temporarily_unavailable", .serviceUnavailable),
            ("invalid_scope", .validationFailed), ("unauthorized_client", .unsupportedGrant), ("weird\u{1b}[2J", .serverError),
        ] as [(String, ErrorReason)]
    )
    func errorRedirects(error: String, reason: ErrorReason) async throws {
        let subject = try ProviderUnderTest.oauth2()
        let request = try await subject.provider.authorizationRequest(redirectURI: URL(string: "http://127.0.0.1:1/cb")!, scopes: [], prompt: nil)
        let outcome = await subject.provider.completeAuthorization(["state": request.state.exposedValue, "error": error], request: request)
        guard case .finished(.failure(let refusal)) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(refusal.reason == reason && !refusal.message.contains("\u{1b}"))
        #expect(subject.transport.requests(to: .token).isEmpty)
    }

    @Test("token exchange: the session's token as subject for an audience; issued_token_type is required; invalid_target names the audience")
    func tokenExchange() async throws {
        let issued = tokens("at-x", extra: #","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","refresh_token":"rt-x""#)
        let transport = ScriptedProvider([.token: [issued, tokens("at-y"), oauthError("invalid_target")]])
        let subject = try ProviderUnderTest.oauth2(transport: transport)
        let session = TokenSet(accessToken: Secret("at-1"), expiresAt: Date().addingTimeInterval(300))
        let variant = TokenVariant(exchange: .init(audience: "api://payments"))
        let exchanged = try await subject.provider.exchange(session, for: variant)
        #expect(exchanged.accessToken.exposedValue == "at-x" && exchanged.refreshToken == nil, "renewed by exchanging again")
        #expect(exchanged.issuedTokenType == "urn:ietf:params:oauth:token-type:access_token")
        #expect(
            transport.form(.token) == [
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": "at-1",
                "subject_token_type": "urn:ietf:params:oauth:token-type:access_token", "audience": "api://payments",
            ]
        )
        let untyped = await #expect(throws: AuthGateError.self) { try await subject.provider.exchange(session, for: variant) }
        #expect(untyped?.reason == .serverError && untyped?.message.contains("issued_token_type") == true)
        let refused = await #expect(throws: AuthGateError.self) { try await subject.provider.exchange(session, for: variant) }
        #expect(refused?.reason == .validationFailed && refused?.fields.map(\.field) == ["audience"])
    }

    @Test("revocation: the refresh token when there is one, with its hint; a refusal is reported, not thrown")
    func revocation() async throws {
        let transport = ScriptedProvider([.revocation: [HTTPResponse(status: 200), HTTPResponse(status: 400)]])
        let subject = try ProviderUnderTest.oauth2(transport: transport)
        let tokens = TokenSet(accessToken: Secret("at-1"), expiresAt: Date().addingTimeInterval(300), refreshToken: Secret("rt-1"))
        #expect(await subject.provider.revokeReporting(tokens) == .revoked)
        #expect(transport.form(.revocation) == ["token": "rt-1", "token_type_hint": "refresh_token"])
        #expect(await subject.provider.revokeReporting(TokenSet(accessToken: Secret("at-2"), expiresAt: Date())) == .refused(status: 400))
        #expect(transport.form(.revocation, 1) == ["token": "at-2", "token_type_hint": "access_token"])
    }
}

extension HTTPResponse {
    /// The same answer with one more header.
    func withHeader(_ name: String, _ value: String) -> HTTPResponse {
        var copy = self
        copy.headers[name] = value
        return copy
    }
}
