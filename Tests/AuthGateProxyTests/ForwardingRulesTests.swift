import FoundationEssentials
import Testing

@testable import AuthGateProxy

@Suite("What the proxy forwards, and how header fields change on the way")
struct ForwardingRulesTests {
    let upstream = try! UpstreamOrigin(parsing: "https://API.example.com/v1/")

    @Test(
        "an origin-form target gets the upstream's origin and path prefix; an absolute one of the same origin is taken",
        arguments: [
            ("/users?page=2", "https://api.example.com/v1/users?page=2"),
            ("/", "https://api.example.com/v1/"),
            ("/a%2Fb", "https://api.example.com/v1/a%2Fb"),
            ("https://api.example.com/x?y=1", "https://api.example.com/v1/x?y=1"),
            ("HTTPS://API.EXAMPLE.COM:443", "https://api.example.com/v1/"),
            ("/files/..hidden/a.b?q=/../", "https://api.example.com/v1/files/..hidden/a.b?q=/../"),
        ]
    )
    func forwardsToTheUpstream(_ uri: String, _ expected: String) {
        #expect(ForwardingRules.target(method: "GET", uri: uri, upstream: upstream) == .forward(URL(string: expected)!))
    }

    @Test(
        "another origin (scheme, host or port), CONNECT, TRACE (it would echo the token), asterisk-form and paths with dot segments (they would leave the upstream's path) are refused with their reasons",
        arguments: [
            ("GET", "https://evil.example.net/", "other_origin", 403),
            ("GET", "http://api.example.com/", "other_origin", 403),
            ("GET", "https://api.example.com:8443/", "other_origin", 403),
            ("GET", "https://api.example.com.evil.net/", "other_origin", 403),
            ("CONNECT", "evil.example.net:443", "connect_refused", 405),
            ("connect", "api.example.com:443", "connect_refused", 405),
            ("OPTIONS", "*", "bad_request", 400),
            ("TRACE", "/", "trace_refused", 405),
            ("GET", "/../admin", "bad_request", 400),
            ("GET", "/users/./me", "bad_request", 400),
            ("GET", "/%2E%2e/admin?x=/../", "bad_request", 400),
            ("GET", "https://api.example.com/a/../../evil", "bad_request", 400),
            ("GET", "/..;/admin", "bad_request", 400),
            ("GET", "/.;x/admin", "bad_request", 400),
            ("GET", "/..%2fadmin", "bad_request", 400),
            ("GET", "/..%2Fadmin", "bad_request", 400),
            ("GET", "/..%5cadmin", "bad_request", 400),
            ("GET", "/..\\admin", "bad_request", 400),
            ("GET", "/a%2f..%2f..%2fevil", "bad_request", 400),
        ]
    )
    func refusesWhatIsNotTheUpstream(_ method: String, _ uri: String, _ reason: String, _ status: Int) {
        guard case .refuse(let answer) = ForwardingRules.target(method: method, uri: uri, upstream: upstream) else {
            Issue.record("\(method) \(uri) was forwarded")
            return
        }
        #expect(answer.reason == reason && answer.status == status)
        #expect(!answer.sentence.contains("evil"), "the sentence names the upstream, not the target")
    }

    @Test("hop-by-hop fields, those Connection names, Host, Authorization, DPoP and the framing stay behind; the rest goes on in order")
    func requestFields() {
        let fields: [(name: String, value: String)] = [
            ("Host", "localhost:8787"), ("Authorization", "Bearer someone-elses"), ("DPoP", "forged"),
            ("Connection", "keep-alive, X-Private"), ("X-Private", "1"), ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"), ("Content-Length", "10"), ("Expect", "100-continue"), ("Upgrade", "h2c"),
            ("Proxy-Authorization", "Basic eA=="), ("Proxy-Connection", "keep-alive"),
            ("Accept", "application/json"), ("X-Request-ID", "a"), ("x-request-id", "b"), ("Content-Type", "text/plain"),
        ]
        let forwarded = ForwardingRules.requestFields(fields)
        #expect(forwarded.map(\.name) == ["Accept", "X-Request-ID", "x-request-id", "Content-Type"])
        #expect(forwarded.map(\.value) == ["application/json", "a", "b", "text/plain"])
    }

    @Test(
        "an answer keeps Content-Length and repeated fields (Set-Cookie) and loses the upstream's framing; a Content-Length beside a Transfer-Encoding is dropped too"
    )
    func answerFields() {
        let fields: [(name: String, value: String)] = [
            ("Content-Length", "5"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("Connection", "close, X-Hop"), ("X-Hop", "1"),
            ("Keep-Alive", "timeout=5"), ("WWW-Authenticate", "Bearer"),
        ]
        #expect(ForwardingRules.answerFields(fields).map(\.name) == ["Content-Length", "Set-Cookie", "Set-Cookie", "WWW-Authenticate"])
        // Both framings: the body comes decoded from the chunks, so the length would lie.
        let both: [(name: String, value: String)] = [("Content-Length", "5"), ("Transfer-Encoding", "chunked"), ("X-Kept", "1")]
        #expect(ForwardingRules.answerFields(both).map(\.name) == ["X-Kept"])
    }

    @Test(
        "an upgrade needs Upgrade and a Connection naming it; its request keeps Connection: Upgrade and Upgrade of the hop-by-hop fields and still loses Authorization, Host and the rest; a 101 keeps the upstream's Upgrade"
    )
    func upgradeFields() {
        let request: [(name: String, value: String)] = [
            ("Host", "x"), ("Connection", "keep-alive, Upgrade"), ("Upgrade", "websocket"), ("Authorization", "Bearer forged"),
            ("Sec-WebSocket-Key", "k"), ("Sec-WebSocket-Version", "13"), ("Keep-Alive", "timeout=5"), ("DPoP", "p"),
        ]
        #expect(ForwardingRules.isUpgrade(request))
        #expect(!ForwardingRules.isUpgrade([("Upgrade", "websocket")]), "Upgrade without Connection naming it is not an upgrade")
        #expect(!ForwardingRules.isUpgrade([("Connection", "Upgrade")]))
        let sent = ForwardingRules.upgradeRequestFields(request)
        #expect(sent.map(\.name) == ["Sec-WebSocket-Key", "Sec-WebSocket-Version", "Connection", "Upgrade"], "\(sent)")
        #expect(sent.last?.value == "websocket" && sent[2].value == "Upgrade")
        let answer: [(name: String, value: String)] = [
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", "a"), ("Transfer-Encoding", "chunked"),
        ]
        #expect(ForwardingRules.upgradeAnswerFields(answer).map(\.name) == ["Sec-WebSocket-Accept", "Connection", "Upgrade"])
    }

    @Test("a body's length: none for no or zero Content-Length, -1 for chunked (whatever its case), the length otherwise")
    func bodyLength() {
        #expect(ForwardingRules.bodyLength([]) == nil)
        #expect(ForwardingRules.bodyLength([("Content-Length", "0")]) == nil)
        #expect(ForwardingRules.bodyLength([("content-length", " 1073741824 ")]) == 1_073_741_824)
        #expect(ForwardingRules.bodyLength([("Transfer-Encoding", "gzip, Chunked")]) == -1)
    }

    @Test("--upstream: https, or http only to loopback; no query, fragment or user info; the path prefix kept without its last slash")
    func upstreamParsing() throws {
        #expect(try UpstreamOrigin(parsing: "http://127.0.0.1:8080").origin == "http://127.0.0.1:8080")
        #expect(try UpstreamOrigin(parsing: "http://[::1]:8080/api").description == "http://[::1]:8080/api")
        #expect(try UpstreamOrigin(parsing: "https://api.example.com:443/").description == "https://api.example.com")
        for refused in ["http://api.example.com", "http://10.0.0.1", "ftp://x", "https://api.example.com/?a=1", "https://u:p@api.example.com", "/relative"] {
            #expect(throws: ProxyConfigurationError.self, "\(refused)") { try UpstreamOrigin(parsing: refused) }
        }
    }

    @Test("--listen: HOST:PORT with a numeric host, [::1]:PORT, or unix:/absolute; only loopback and Unix sockets are local")
    func listenParsing() throws {
        #expect(try ListenAddress(parsing: "127.0.0.1:0") == .tcp(host: "127.0.0.1", port: 0))
        #expect(try ListenAddress(parsing: "[::1]:8787") == .tcp(host: "::1", port: 8787))
        #expect(try ListenAddress(parsing: "unix:/run/user/1000/api.sock") == .unix(path: "/run/user/1000/api.sock"))
        #expect(try ListenAddress(parsing: "127.0.0.2:1").isLocal)
        #expect(try !ListenAddress(parsing: "0.0.0.0:8787").isLocal)
        #expect(try !ListenAddress(parsing: "[::]:8787").isLocal)
        for refused in ["localhost:8787", "127.0.0.1", "127.0.0.1:70000", "unix:relative.sock", "unix:/" + String(repeating: "x", count: 120)] {
            #expect(throws: ProxyConfigurationError.self, "\(refused)") { try ListenAddress(parsing: refused) }
        }
    }
}
