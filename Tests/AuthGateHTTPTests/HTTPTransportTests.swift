import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Foundation
import Testing

/// The request policy, the reading of throttling answers, and libcurl behind CurlTransport
/// against a plain HTTP stand-in on loopback: in process, no provider.
@Suite("HTTP: the request policy and CurlTransport")
struct HTTPTransportTests {
    @Test(
        "the policy allows https anywhere; plain http only to 127.0.0.1 or ::1, and only when it allows insecure loopback; nothing else",
        arguments: [
            ("https://idp.example.test/token", false, true), ("HTTPS://idp.example.test/token", false, true),
            ("http://idp.example.test/token", true, false), ("http://127.0.0.1:8080/token", false, false),
            ("http://127.0.0.1:8080/token", true, true), ("http://[::1]:8080/token", true, true), ("http://localhost:8080/token", true, false),
            ("http://127.0.0.2/token", true, false), ("ftp://127.0.0.1/token", true, false), ("file:///etc/passwd", true, false),
        ]
    )
    func policyAllows(url: String, insecureLoopback: Bool, allowed: Bool) throws {
        let policy = HTTPRequestPolicy(allowInsecureLoopback: insecureLoopback)
        #expect(policy.allows(try #require(URL(string: url))) == allowed)
    }

    @Test("the policy's defaults: 3 s to connect, 10 s in all, https only, 1 MiB of body; a client certificate prints redacted")
    func policyDefaults() {
        let policy = HTTPRequestPolicy()
        #expect(policy.connectTimeoutMilliseconds == 3000 && policy.totalTimeoutMilliseconds == 10_000)
        #expect(!policy.allowInsecureLoopback && policy.maximumResponseBytes == 1 << 20 && policy.caBundle == nil)
        let certificate = HTTPRequestPolicy.ClientCertificate(certificate: Array("cert".utf8), key: Array("private key".utf8))
        #expect("\(certificate)" == "ClientCertificate(<redacted>)")
    }

    @Test(
        "Retry-After in seconds (spaces trimmed) or as an HTTP date, for any answer, from 1 s to an hour; nonsense is not read",
        arguments: [
            (503, "120", 120), (429, " 5 ", 5), (200, "7", 7), (429, "-5", 1), (429, "0", 1), (429, "86400", 3600),
            (503, "Wed, 21 Oct 2037 07:28:00 GMT", 3600), (503, "Sun, 06 Nov 1994 08:49:37 GMT", 1), (503, "Sunday, 06-Nov-94 08:49:37 GMT", nil),
            (503, "soon", nil), (503, "", nil),
        ] as [(Int, String, Int?)]
    )
    func retryAfter(status: Int, value: String, seconds: Int?) {
        #expect(HTTPResponse(status: status, headers: ["retry-after": value]).retryAfterSeconds == seconds)
    }

    @Test("a 429's X-Rate-Limit-Reset counts from now, at least 1 s and at most an hour")
    func rateLimitReset() {
        let now = Int(Date().timeIntervalSince1970)
        let later = HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(now + 90)"]).retryAfterSeconds
        #expect(later.map { (88...91).contains($0) } == true)
        #expect(HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(now + 86_400)"]).retryAfterSeconds == 3600)
        #expect(HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(now - 60)"]).retryAfterSeconds == 1)
        #expect(HTTPResponse(status: 503, headers: ["x-rate-limit-reset": "\(now + 90)"]).retryAfterSeconds == nil)
        // Values whose difference with now would overflow: read as soon, or an hour, not a trap.
        #expect(HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(Int.min)"]).retryAfterSeconds == 1)
        #expect(HTTPResponse(status: 429, headers: ["x-rate-limit-reset": "\(Int.max)"]).retryAfterSeconds == 3600)
    }

    @Test("an HTTP date in Retry-After counts from now")
    func retryAfterDate() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let inTwoMinutes = formatter.string(from: Date().addingTimeInterval(120))
        let seconds = HTTPResponse(status: 429, headers: ["retry-after": inTwoMinutes]).retryAfterSeconds
        #expect(seconds.map { (118...121).contains($0) } == true, "\(inTwoMinutes): \(seconds.map(String.init) ?? "nil")")
    }

    @Test("CurlTransport refuses a URL the policy does not allow before any connection")
    func forbiddenURL() async throws {
        for url in ["http://idp.example.test/token", "ftp://127.0.0.1/x"] {
            let request = HTTPRequest(method: .get, url: try #require(URL(string: url)), endpoint: .discovery)
            let error = await #expect(throws: HTTPTransportError.self) {
                try await CurlTransport().send(request, policy: HTTPRequestPolicy(allowInsecureLoopback: true))
            }
            #expect(error?.kind == .forbiddenURL)
        }
    }

    @Test("a POST reaches the server with its headers and body; the answer's status, headers (lower-cased) and body come back")
    func post() async throws {
        let server = try LoopbackHTTPServer { _ in
            LoopbackHTTPServer.response(
                200,
                headers: [("Content-Type", "application/json"), ("DPoP-Nonce", "n-1"), ("Retry-After", "3")],
                body: Array(#"{"ok":true}"#.utf8)
            )
        }
        let request = HTTPRequest(
            method: .post,
            url: try #require(URL(string: server.url + "/token")),
            endpoint: .token,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic YzpzZWNyZXQ=")],
            body: Array("grant_type=client_credentials".utf8)
        )
        let response = try await CurlTransport().send(request, policy: HTTPRequestPolicy(allowInsecureLoopback: true))
        #expect(response.status == 200 && response.body == Array(#"{"ok":true}"#.utf8))
        #expect(response.headers["content-type"] == "application/json" && response.headers["dpop-nonce"] == "n-1" && response.retryAfterSeconds == 3)
        let sent = try #require(server.requests.first)
        #expect(sent.hasPrefix("POST /token HTTP/1.1\r\n"))
        #expect(sent.contains("Authorization: Basic YzpzZWNyZXQ=\r\n") && sent.contains("User-Agent: authgate\r\n"))
        #expect(!sent.contains("Expect:"), "no 100-continue round trip")
        #expect(sent.hasSuffix("\r\n\r\ngrant_type=client_credentials"))
    }

    @Test("a redirect is not followed: the 302 is the answer")
    func noRedirects() async throws {
        let server = try LoopbackHTTPServer { _ in LoopbackHTTPServer.response(302, headers: [("Location", "http://127.0.0.1:1/elsewhere")]) }
        let request = HTTPRequest(method: .get, url: try #require(URL(string: server.url + "/")), endpoint: .discovery)
        let response = try await CurlTransport().send(request, policy: HTTPRequestPolicy(allowInsecureLoopback: true))
        #expect(response.status == 302 && server.requests.count == 1)
    }

    @Test("a body larger than the policy's limit is refused as it arrives, with or without a Content-Length")
    func responseTooLarge() async throws {
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
        let withLength = try LoopbackHTTPServer { _ in LoopbackHTTPServer.response(200, body: body) }
        let withoutLength = try LoopbackHTTPServer { _ in Array("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".utf8) + body }
        for server in [withLength, withoutLength] {
            let request = HTTPRequest(method: .get, url: try #require(URL(string: server.url + "/jwks")), endpoint: .jwks)
            let error = await #expect(throws: HTTPTransportError.self) {
                try await CurlTransport().send(request, policy: HTTPRequestPolicy(allowInsecureLoopback: true, maximumResponseBytes: 16 * 1024))
            }
            #expect(error?.kind == .responseTooLarge, "\(error.map { "\($0)" } ?? "")")
        }
    }

    @Test("a server that never answers is timedOut after the policy's total time; a closed port is cannotConnect")
    func timeoutsAndClosedPorts() async throws {
        let silent = try LoopbackHTTPServer { _ in nil }
        let request = HTTPRequest(method: .get, url: try #require(URL(string: silent.url + "/")), endpoint: .discovery)
        let started = ContinuousClock.now
        let timedOut = await #expect(throws: HTTPTransportError.self) {
            try await CurlTransport().send(request, policy: HTTPRequestPolicy(totalTimeoutMilliseconds: 300, allowInsecureLoopback: true))
        }
        // A 300 ms limit; the bound is loose because the full run's two cores, shared with the
        // system tests, can keep the awaiting task from running for seconds. Without the limit
        // the request would wait for the silent server as long as it lives.
        #expect(timedOut?.kind == .timedOut && ContinuousClock.now - started < .seconds(60))

        // A port that was just free: bound by a server that is gone.
        let closedPort = try LoopbackHTTPServer { _ in nil }.port
        let closed = HTTPRequest(method: .get, url: try #require(URL(string: "http://127.0.0.1:\(closedPort)/")), endpoint: .discovery)
        let refused = await #expect(throws: HTTPTransportError.self) {
            try await CurlTransport().send(closed, policy: HTTPRequestPolicy(allowInsecureLoopback: true))
        }
        #expect(refused?.kind == .cannotConnect, "\(refused.map { "\($0)" } ?? "")")
    }

    @Test(
        "a provider's request and a proxied exchange that libcurl ends the same way give the same sentence (one table): nothing listening, and a server that closes without an answer"
    )
    func oneSentencePerCurlFailure() async throws {
        let closedPort = try LoopbackHTTPServer { _ in nil }.port
        let mute = try LoopbackHTTPServer { _ in [] }
        for (url, kind, sentence) in [
            (
                "http://127.0.0.1:\(closedPort)/", HTTPTransportError.Kind.cannotConnect,
                "cannot connect to 127.0.0.1:\(closedPort) (nothing answers, or the network is down)"
            ),
            (mute.url + "/", .other, "the connection to \(mute.url.dropFirst("http://".count)) broke: "),
        ] {
            let target = try #require(URL(string: url))
            let provider = await #expect(throws: HTTPTransportError.self) {
                try await CurlTransport().send(
                    HTTPRequest(method: .get, url: target, endpoint: .discovery),
                    policy: HTTPRequestPolicy(allowInsecureLoopback: true)
                )
            }
            let answer = RecordingSink()
            let exchanges = StreamedExchanges()
            try exchanges.start(
                StreamedRequest(method: "GET", url: target, headers: [], bodyLength: nil),
                body: nil,
                sink: answer,
                policy: StreamPolicy(allowInsecureLoopback: true)
            )
            let exchange = try #require(answer.outcome(within: 30)).error
            #expect(provider?.kind == kind && exchange?.kind == kind, "\(provider.map { "\($0)" } ?? "") / \(exchange.map { "\($0)" } ?? "")")
            #expect(provider?.message == exchange?.message && provider?.message.hasPrefix(sentence) == true, "\(provider?.message ?? "")")
        }
    }
}
