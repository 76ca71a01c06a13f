import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Swift client's HTTPAuthorizer: its retry rule in process (HTTPRetryPolicy, no
/// network), then with URLSession against the real daemon and a loopback API.
@Suite("HTTPAuthorizer")
struct HTTPAuthorizerTests {
    // MARK: The rule, in process

    @Test(
        "origins: scheme and host in lower case, the default port filled in; no origin for what is not absolute http(s)",
        arguments: [
            ("https://API.example.com/a?b", "https://api.example.com:443/c", true),
            ("HTTP://127.0.0.1/x", "http://127.0.0.1:80", true),
            ("http://[::1]:8080/", "http://[::1]:8080/other", true),
            ("https://api.example.com/", "http://api.example.com/", false),
            ("https://api.example.com/", "https://api.example.com:8443/", false),
            ("http://localhost:9000/", "http://127.0.0.1:9000/", false),
            ("https://api.example.com/", "https://api.example.com.evil.test/", false),
        ]
    )
    func origins(first: String, second: String, same: Bool) throws {
        let a = try #require(HTTPOrigin(url: first))
        let b = try #require(HTTPOrigin(url: second))
        #expect((a == b) == same, "\(a) \(b)")
    }

    @Test(
        "no origin for a URL that names none (authorize refuses it: urlSession below)",
        arguments: ["/relative/path", "ftp://files.example.com/", "https://", "mailto:someone@example.com", "not a url"]
    )
    func noOrigin(url: String) {
        #expect(HTTPOrigin(url: url) == nil)
    }

    @Test(
        "use_dpop_nonce is recognized in its spellings, and only with the DPoP scheme",
        arguments: [
            (#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#, true),
            (#"DPoP algs="ES256", error="use_dpop_nonce""#, true),
            (#"dpop error=use_dpop_nonce"#, true),
            (#"DPoP error = "USE_DPOP_NONCE""#, true),
            (#"Bearer error="invalid_token", DPoP error="use_dpop_nonce""#, true),
            (#"DPoP error="invalid_token""#, false),
            (#"Bearer error="use_dpop_nonce""#, false),
            (#"DPoP error_description="use_dpop_nonce""#, false),
            (#"DPoP error="use_dpop_nonce_not""#, false),
            ("", false),
        ]
    )
    func nonceChallenge(challenge: String, asks: Bool) {
        #expect(HTTPRetryPolicy.asksForNonce(challenge) == asks)
    }

    static func request(_ token: String, type: String = "Bearer", url: String = "https://api.example.com/data") throws -> AuthorizedRequest {
        let result = TokenResult(accessToken: Secret(token), tokenType: type, expiresAt: Date().addingTimeInterval(3600), scopes: [], idToken: nil)
        return AuthorizedRequest(
            method: "GET",
            url: url,
            origin: try #require(HTTPOrigin(url: url)),
            token: result,
            proof: type == "DPoP" ? "proof" : nil
        )
    }

    static let nonceChallenge = HTTPAnswer(status: 401, headers: ["www-authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "n-1"])
    static let refused = HTTPAnswer(status: 401, headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])

    @Test("a DPoP nonce: one retry with it per request, remembered for its origin only; a nonce on a 200 is kept too; an unusable one is not")
    func dpopNonce() throws {
        var policy = HTTPRetryPolicy()
        var first = try Self.request("t1", type: "DPoP")
        let origin = first.origin
        #expect(policy.decide(Self.nonceChallenge, to: first) == .retryWithNonce("n-1"))
        #expect(policy.nonce(for: origin) == "n-1")
        #expect(policy.nonce(for: try #require(HTTPOrigin(url: "https://other.example.com/"))) == nil)
        first.nonceRetried = true
        #expect(policy.decide(Self.nonceChallenge, to: first) == .handBack, "a nonce once per request")
        #expect(policy.decide(HTTPAnswer(status: 200, headers: ["dpop-nonce": "n-2"]), to: first) == .handBack)
        #expect(policy.nonce(for: origin) == "n-2")
        #expect(policy.decide(HTTPAnswer(status: 200, headers: ["dpop-nonce": "bad nonce\""]), to: first) == .handBack)
        #expect(policy.nonce(for: origin) == "n-2", "a nonce that could not go into a proof is not kept")
        // A 401 asking for a nonce without giving one is a refusal of the token.
        let noNonce = HTTPAnswer(status: 401, headers: ["www-authenticate": #"DPoP error="use_dpop_nonce""#])
        #expect(policy.decide(noNonce, to: try Self.request("t1", type: "DPoP")) == .replaceToken)
        // A Bearer request does not collect nonces, and takes a nonce challenge for a refusal.
        let bearer = try Self.request("b1", url: "https://bearer.example.com/")
        #expect(policy.decide(Self.nonceChallenge, to: bearer) == .replaceToken)
        #expect(policy.nonce(for: bearer.origin) == nil)
    }

    @Test("a refused token: reported once, retried once; refused again as the fresh token, never retried; an API that refuses everything is never a loop")
    func refusedTokens() throws {
        var policy = HTTPRetryPolicy()
        var stale = try Self.request("stale")
        #expect(policy.decide(Self.refused, to: stale) == .replaceToken)
        #expect(policy.refused(Secret("stale")) == .report)
        #expect(policy.refused(Secret("stale")) == .report, "another request refused while the report is under way joins it")
        policy.reported(Secret("stale"))
        #expect(policy.worthRetrying(Secret("fresh"), after: Secret("stale")))
        #expect(!policy.worthRetrying(Secret("stale"), after: Secret("stale")), "the daemon answered the refused token: no retry")
        // Another request still holding the stale token: the current token, the daemon not told again.
        #expect(policy.decide(Self.refused, to: try Self.request("stale")) == .replaceToken)
        #expect(policy.refused(Secret("stale")) == .takeCurrent)
        // The retry with the fresh token is refused as well: that is the answer.
        var fresh = try Self.request("fresh")
        fresh.tokenRetried = true
        #expect(policy.decide(Self.refused, to: fresh) == .handBack)
        #expect(policy.refused(Secret("fresh")) == .giveUp, "a token refused as the fresh one gets no retry")
        #expect(!policy.worthRetrying(Secret("fresh"), after: Secret("stale")))
        // Nothing but a 401 is retried.
        stale.tokenRetried = false
        for status in [200, 302, 403, 404, 500] {
            #expect(policy.decide(HTTPAnswer(status: status, headers: ["www-authenticate": "Bearer"]), to: stale) == .handBack)
        }
    }

    @Test("an answer from another origin (a redirect elsewhere) is handed back: no retry, no report, no nonce kept")
    func otherOrigin() throws {
        var policy = HTTPRetryPolicy()
        let request = try Self.request("t", type: "DPoP", url: "https://api.example.com/start")
        for elsewhere in ["https://evil.example.com/landing", "http://api.example.com/landing", "https://api.example.com:8443/"] {
            var answer = Self.nonceChallenge
            answer.url = elsewhere
            #expect(policy.decide(answer, to: request) == .handBack)
            answer = Self.refused
            answer.url = elsewhere
            #expect(policy.decide(answer, to: request) == .handBack)
        }
        #expect(policy.nonce(for: request.origin) == nil)
        var sameOrigin = Self.refused
        sameOrigin.url = "https://API.example.com:443/after-a-redirect"
        #expect(policy.decide(sameOrigin, to: request) == .replaceToken, "a redirect within the origin is the origin's answer")
    }

    @Test("the policy forgets the oldest past what it remembers")
    func bounded() throws {
        var policy = HTTPRetryPolicy()
        for index in 0...HTTPRetryPolicy.remembered {
            let request = try Self.request("t", type: "DPoP", url: "https://host\(index).example.com/")
            _ = policy.decide(HTTPAnswer(status: 200, headers: ["DPoP-Nonce": "n\(index)"]), to: request)
        }
        #expect(policy.nonce(for: try #require(HTTPOrigin(url: "https://host0.example.com/"))) == nil)
        #expect(policy.nonce(for: try #require(HTTPOrigin(url: "https://host1.example.com/"))) == "n1")
    }

    // MARK: URLSession, the real daemon, a loopback API

    @Test(
        "URLSession through HTTPAuthorizer: a stale token is reported once and the request retried once; an API that refuses everything costs one token.rejected per token; a redirect to another origin is not retried; ten 401s at once make one report; a bad URL is validation_failed"
    )
    func urlSession() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let api = try LoopbackServer(script: "resource_api.py", workdir: daemon.scratch.path + "/api", arguments: [])
        let base = try #require(api.info["url"] as? String)
        let client = AuthGateClient(socketPath: daemon.socketPath)
        let authorizer = HTTPAuthorizer(client: client, provider: "mock")
        func get(_ url: String, in session: URLSession = URLSession(configuration: .ephemeral)) async throws -> Int {
            try await Self.get(url, with: authorizer, in: session)
        }
        func seen() throws -> [(path: String, token: String?)] {
            let body = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", base + "/_seen"]).stdout
            let records = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] ?? []
            return records.map { ($0["path"] as? String ?? "", $0["token"] as? String) }
        }
        /// How many token.rejected calls the daemon answered (its metrics).
        func rejectedCalls() throws -> Int {
            let lines = try daemon.cli(["metrics"]).stdout.split(separator: "\n")
                .filter { $0.hasPrefix("authgate_rpc_requests_total{") && $0.contains(#"method="token.rejected""#) }
            return Int(lines.compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +))
        }

        // The first token this API sees is stale: one 401, one token.rejected, one retry.
        let stale = try await client.token(provider: "mock").accessToken
        #expect(try await get(base + "/stale/a") == 200)
        let fresh = try await client.token(provider: "mock").accessToken
        #expect(try fresh != stale && rejectedCalls() == 1)
        #expect(try seen().map(\.path) == ["/stale/a", "/stale/a"])
        #expect(try Set(seen().compactMap(\.token)).count == 2, "the retry carried the new token")
        #expect(try await get(base + "/stale/b") == 200)
        #expect(try rejectedCalls() == 1 && seen().count == 3, "the new token goes straight through")

        // An API that refuses everything: five requests, one report of the token, no loop.
        for index in 0..<5 {
            #expect(try await get(base + "/refuse/\(index)") == 401)
        }
        #expect(try rejectedCalls() == 2, "one token.rejected for the token that was current")
        #expect(try seen().filter { $0.path.hasPrefix("/refuse/") }.count == 6, "one retry in all, with the token that answer gave")
        let afterRefusals = try await client.token(provider: "mock").accessToken
        for index in 0..<3 {
            #expect(try await get(base + "/refuse/again-\(index)") == 401)
        }
        let stillCurrent = try await client.token(provider: "mock").accessToken
        #expect(try rejectedCalls() == 2 && stillCurrent == afterRefusals, "a token refused as the fresh one is not reported again")

        // A redirect to another origin: its 401 is handed back, the daemon hears nothing.
        let elsewhere = "http://localhost:\(api.port)/refuse/elsewhere"
        let before = try seen().count
        #expect(try await get(base + "/redirect?to=" + elsewhere) == 401)
        #expect(try seen().count == before + 2, "the redirect and the request it led to, no retry")
        // URLSession follows that redirect with the headers set on the request, Authorization
        // included (swift-corelibs-foundation); a delegate that refuses redirects to another
        // origin keeps the token home (docs/INTEGRATIONS.md).
        let guarded = URLSession(configuration: .ephemeral, delegate: SameOriginRedirects(), delegateQueue: nil)
        let beforeGuarded = try seen().count
        #expect(try await get(base + "/redirect?to=" + elsewhere, in: guarded) == 302)
        #expect(try seen().count == beforeGuarded + 1, "the other origin was not asked")
        #expect(try await get(base + "/redirect?to=" + base + "/stale/c", in: guarded) == 200, "a redirect within the origin is followed")
        let afterRedirect = try await client.token(provider: "mock").accessToken
        #expect(try rejectedCalls() == 2 && afterRedirect == afterRefusals)

        // Ten requests at once with a token the API refuses: one token.rejected, whose answer
        // they all retry with.
        let burst = HTTPAuthorizer(client: client, provider: "mock")
        let reportsBefore = try rejectedCalls()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            let session = URLSession(configuration: .ephemeral)
            for index in 0..<10 {
                group.addTask { try await Self.get(base + "/once/burst/\(index)", with: burst, in: session) }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 10))
        #expect(try rejectedCalls() == reportsBefore + 1, "one report for the ten")
        #expect(try seen().filter { $0.path.hasPrefix("/once/burst/") && $0.token == nil }.isEmpty)

        do {
            _ = try await authorizer.authorize(method: "GET", url: "/relative")
            Issue.record("a relative URL has no origin")
        } catch {
            #expect(error.reason == .validationFailed && error.message.contains("absolute http or https URL"))
        }
        for secret in [stale, fresh, afterRefusals] {
            #expect(!daemon.logText.contains(secret.exposedValue) && !api.logText.contains(secret.exposedValue))
        }
    }
}

extension HTTPAuthorizerTests {
    /// A GET through `authorizer` with `session`: the HTTP status of the last answer.
    static func get(_ url: String, with authorizer: HTTPAuthorizer, in session: URLSession) async throws -> Int {
        try await authorizer.send(method: "GET", url: url) { authorized in
            var request = URLRequest(url: try #require(URL(string: url)))
            for (name, value) in authorized.headers { request.setValue(value, forHTTPHeaderField: name) }
            let (_, response) = try await session.data(for: request)
            let http = try #require(response as? HTTPURLResponse)
            return (
                http.statusCode,
                HTTPAnswer(
                    status: http.statusCode,
                    url: http.url?.absoluteString,
                    headers: http.allHeaderFields as? [String: String] ?? [:]
                )
            )
        }
    }
}

/// Follows a redirect only within the origin the request went to: what a URLSession that
/// sends tokens needs (docs/INTEGRATIONS.md).
final class SameOriginRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let from = response.url.flatMap { HTTPOrigin(url: $0.absoluteString) }
        let to = request.url.flatMap { HTTPOrigin(url: $0.absoluteString) }
        completionHandler(from != nil && from == to ? request : nil)
    }
}
