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
}
