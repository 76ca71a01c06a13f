import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

private func request(_ url: String = "https://api.example.test/v1/items", token: String = "at-1", type: String = "Bearer") throws -> AuthorizedRequest {
    AuthorizedRequest(
        method: "GET",
        url: url,
        origin: try #require(HTTPOrigin(url: url)),
        token: TokenResult(accessToken: Secret(token), tokenType: type, expiresAt: Date(timeIntervalSince1970: 1_800_000_000), scopes: [], idToken: nil),
        proof: type == "DPoP" ? "proof" : nil
    )
}

/// The HTTP retry rule (pure) and HTTPAuthorizer driving it against a stand-in daemon.
@Suite("HTTP authorization: the retry rule")
struct HTTPRetryPolicyTests {
    @Test(
        "origins: scheme and host in lower case with the default port; only absolute http(s) URLs with a host",
        arguments: [
            ("https://API.example.test/x", "https://api.example.test:443"), ("http://api.example.test:8080", "http://api.example.test:8080"),
            ("https://[::1]:8443/", "https://[::1]:8443"), ("ftp://api.example.test/", nil), ("/relative", nil), ("https://", nil),
        ] as [(String, String?)]
    )
    func origins(url: String, origin: String?) {
        #expect(HTTPOrigin(url: url)?.description == origin)
    }

    @Test(
        "DPoP's use_dpop_nonce challenge is read in any case, quoted or not, beside other parameters; another scheme or error is not one",
        arguments: [
            (#"DPoP error="use_dpop_nonce""#, true), (#"dpop  error = use_dpop_nonce, error_description="x""#, true),
            (#"Bearer realm="api", DPoP algs="ES256", error="use_dpop_nonce""#, true), (#"Bearer error="use_dpop_nonce""#, false),
            (#"DPoP error="invalid_token""#, false), ("", false),
        ]
    )
    func nonceChallenges(challenge: String, asks: Bool) {
        #expect(HTTPRetryPolicy.asksForNonce(challenge) == asks)
    }

    @Test("a DPoP nonce challenge is retried once with the nonce, which is remembered for the origin")
    func nonceRetry() throws {
        var policy = HTTPRetryPolicy()
        var sent = try request(type: "DPoP")
        let challenge = HTTPAnswer(status: 401, headers: ["www-authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "n-1"])
        #expect(policy.decide(challenge, to: sent) == .retryWithNonce("n-1"))
        #expect(policy.nonce(for: sent.origin) == "n-1")
        sent.nonceRetried = true
        #expect(policy.decide(challenge, to: sent) == .handBack, "once per request")
        #expect(policy.decide(HTTPAnswer(status: 200, headers: ["dpop-nonce": "n-2"]), to: sent) == .handBack)
        #expect(policy.nonce(for: sent.origin) == "n-2", "a success's nonce is kept too")
        #expect(policy.decide(HTTPAnswer(status: 200, headers: ["dpop-nonce": "bad nonce\n"]), to: sent) == .handBack)
        #expect(policy.nonce(for: sent.origin) == "n-2", "a nonce that could not be sent is ignored")
    }

    @Test("a 401 is reported once per token, later 401s to it take the current token, and a fresh token refused too is given up")
    func refusedTokens() throws {
        var policy = HTTPRetryPolicy()
        let first = try request(token: "at-1")
        #expect(policy.decide(HTTPAnswer(status: 401), to: first) == .replaceToken)
        #expect(policy.refused(Secret("at-1")) == .report)
        #expect(policy.refused(Secret("at-1")) == .report, "a report under way is joined")
        policy.reported(Secret("at-1"))
        #expect(policy.refused(Secret("at-1")) == .takeCurrent)
        #expect(policy.worthRetrying(Secret("at-2"), after: Secret("at-1")) && !policy.worthRetrying(Secret("at-1"), after: Secret("at-1")))
        var retried = try request(token: "at-2")
        retried.tokenRetried = true
        #expect(policy.decide(HTTPAnswer(status: 401), to: retried) == .handBack)
        #expect(policy.refused(Secret("at-2")) == .giveUp && !policy.worthRetrying(Secret("at-2"), after: Secret("at-1")))
    }

    @Test("an answer from another origin (a redirect elsewhere) is handed back whatever it says; other statuses too")
    func otherOrigins() throws {
        var policy = HTTPRetryPolicy()
        let sent = try request(type: "DPoP")
        let elsewhere = HTTPAnswer(
            status: 401,
            url: "https://evil.example.test/",
            headers: ["www-authenticate": #"DPoP error="use_dpop_nonce""#, "dpop-nonce": "n-1"]
        )
        #expect(policy.decide(elsewhere, to: sent) == .handBack && policy.nonce(for: sent.origin) == nil)
        for status in [200, 403, 500] { #expect(policy.decide(HTTPAnswer(status: status), to: sent) == .handBack) }
    }

    @Test("the policy remembers a bounded number of origins: the oldest nonce is forgotten first")
    func bounded() throws {
        var policy = HTTPRetryPolicy()
        for index in 0...HTTPRetryPolicy.remembered {
            let sent = try request("https://api\(index).example.test/", type: "DPoP")
            _ = policy.decide(HTTPAnswer(status: 200, headers: ["dpop-nonce": "n-\(index)"]), to: sent)
        }
        #expect(policy.nonce(for: try #require(HTTPOrigin(url: "https://api0.example.test/"))) == nil)
        #expect(policy.nonce(for: try #require(HTTPOrigin(url: "https://api1.example.test/"))) == "n-1")
    }

    @Test("HTTPAuthorizer.send: a 401 makes one token.rejected call and one retry with the new token; a second 401 is handed back")
    func authorizerRetries() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { method, id in
            method == "token.rejected" ? tokenAnswer(id, "at-2") : tokenAnswer(id, "at-1")
        }
        let authorizer = HTTPAuthorizer(client: AuthGateClient(socketPath: daemon.path), provider: "corp")
        var sent: [String] = []
        let status = try await authorizer.send(method: "GET", url: "https://api.example.test/v1") { authorized in
            let header = authorized.headers.first { $0.name == "Authorization" }?.value ?? ""
            sent.append(header)
            return (401, HTTPAnswer(status: 401))
        }
        #expect(status == 401)
        #expect(sent == ["Bearer at-1", "Bearer at-2"])
        #expect(daemon.requests.map { $0.firstMatch(of: /"method":"([^"]+)"/).map { String($0.1) } ?? "" } == ["token", "token.rejected"])
        await #expect(throws: AuthGateClientError.self) { _ = try await authorizer.authorize(method: "GET", url: "not a url") }
    }
}
