import FoundationEssentials
import Testing

@testable import AuthGateHTTP

/// The HTTP/1.1 an upgrade's request is written as and its answer's head read back in
/// (UpstreamConnection): in process, no connection. The connection itself is APIProxyTests'.
@Suite("HTTP: an upgrade's head, written and read")
struct UpstreamConnectionTests {
    @Test("the request line takes the URL's path and query, Host its host and explicit port (an IPv6 one in brackets), then the fields as given")
    func requestHead() throws {
        let request = StreamedRequest(
            method: "GET",
            url: URL(string: "http://[::1]:8080/v1/ws?room=a%20b")!,
            headers: [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Authorization", "Bearer t")],
            bodyLength: nil
        )
        let head = String(decoding: try UpstreamConnection.head(of: request), as: UTF8.self)
        #expect(
            head == "GET /v1/ws?room=a%20b HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer t\r\n\r\n"
        )
        let bare = StreamedRequest(method: "GET", url: URL(string: "https://api.example.com")!, headers: [], bodyLength: nil)
        #expect(String(decoding: try UpstreamConnection.head(of: bare), as: UTF8.self) == "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
    }

    @Test("a line break or a NUL in a field's name or value, or in the method, is refused: it would smuggle a request into the head")
    func injectionRefused() {
        let url = URL(string: "http://127.0.0.1:1/ws")!
        for headers in [[("X-A", "1\r\nX-B: 2")], [("X-A\n", "1")], [("X-A", "1\0")]] {
            let request = StreamedRequest(method: "GET", url: url, headers: headers, bodyLength: nil)
            #expect(throws: HTTPTransportError.self) { try UpstreamConnection.head(of: request) }
        }
        #expect(throws: HTTPTransportError.self) {
            try UpstreamConnection.head(of: StreamedRequest(method: "GET /x HTTP/1.1\r\n", url: url, headers: [], bodyLength: nil))
        }
    }

    @Test("an answer's head: its status, its fields in order (a folded line joined to the one before), where the blank line is; not HTTP is status 0")
    func answerHead() {
        let bytes = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nX-Long: a\r\n b\r\nConnection: Upgrade\r\n\r\nframe".utf8)
        let end = UpstreamConnection.headEnd(bytes)
        #expect(end == bytes.count - 9)
        let (status, fields) = UpstreamConnection.parseHead(bytes[..<end!])
        #expect(status == 101)
        #expect(fields.map(\.name) == ["Upgrade", "X-Long", "Connection"] && fields[1].value == "a b")
        #expect(UpstreamConnection.headEnd(Array("HTTP/1.1 200 OK\r\n".utf8)) == nil)
        #expect(UpstreamConnection.parseHead(ArraySlice("SSH-2.0-OpenSSH".utf8)).status == 0)
    }
}
