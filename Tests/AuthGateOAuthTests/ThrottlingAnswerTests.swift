import AuthGateCore
import Foundation
import Testing

@testable import AuthGateHTTP
@testable import AuthGateOAuth

/// How long a throttling provider asks to be left alone, read from its answer: RFC 9110's
/// `Retry-After` (Entra ID's client-credentials 429,
/// https://learn.microsoft.com/en-us/entra/msal/dotnet/advanced/client-and-server-throttling), or
/// Okta's `X-Rate-Limit-Reset` (https://developer.okta.com/docs/reference/rl-best-practices/).
@Suite("Throttling answers")
struct ThrottlingAnswerTests {
    @Test("Retry-After in seconds; else a 429's X-Rate-Limit-Reset as seconds from now (at least 1); nothing for other answers")
    func retryAfter() {
        let now = Int(Date().timeIntervalSince1970)
        #expect(HTTPResponse(status: 429, headers: ["retry-after": " 60 "]).retryAfterSeconds == 60)
        let okta = HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(now + 30)"]).retryAfterSeconds
        #expect(okta.map { (29...31).contains($0) } == true, "\(String(describing: okta))")
        #expect(HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(now - 5)"]).retryAfterSeconds == 1)
        #expect(HTTPResponse(status: 429, headers: ["retry-after": "5", "x-rate-limit-reset": "\(now + 30)"]).retryAfterSeconds == 5)
        #expect(HTTPResponse(status: 200, headers: ["x-rate-limit-reset": "\(now + 30)"]).retryAfterSeconds == nil)
        #expect(HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "soon"]).retryAfterSeconds == nil)
        let error = ProviderFailure.unexpected(HTTPResponse(status: 429, headers: ["retry-after": "60"]), provider: "corp", what: "token request")
        #expect(error.reason == .serviceUnavailable && error.retryAfterSeconds == 60)
    }

    @Test("a 429 with an OAuth error body (as Entra ID sends) is throttling with its wait, not a refusal of the request; a 503 with Retry-After too")
    func throttlingWithAnErrorBody() async throws {
        let json = ["content-type": "application/json"]
        let transport = ScriptedTransport([
            HTTPResponse(status: 429, headers: json.merging(["retry-after": "60"]) { $1 }, body: Array(#"{"error":"too_many_requests"}"#.utf8)),
            HTTPResponse(status: 503, headers: json.merging(["retry-after": "7"]) { $1 }, body: Array(#"{"error":"temporarily_unavailable"}"#.utf8)),
            HTTPResponse(status: 400, headers: json, body: Array(#"{"error":"too_many_requests"}"#.utf8)),
        ])
        let endpoint = TokenEndpoint(
            provider: "corp",
            client: ClientAuthenticator(clientID: "c", method: .none, secret: nil, signingKey: nil),
            transport: transport,
            policy: HTTPRequestPolicy()
        )
        var answers: [AuthGateError] = []
        for _ in 0..<3 {
            do {
                _ = try await endpoint.requestTokens(
                    at: URL(string: "https://idp.example.test/token")!,
                    [("grant_type", "client_credentials")],
                    purpose: .clientSignIn,
                    requestedScopes: [],
                    now: Date()
                )
            } catch {
                answers.append(error)
            }
        }
        #expect(answers.map(\.reason) == [.serviceUnavailable, .serviceUnavailable, .serverError], "\(answers)")
        #expect(answers.map(\.retryAfterSeconds) == [60, 7, nil])
    }
}
