import AuthGateCore
internal import CCurl
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A request asking the upstream to switch protocols (`Upgrade: websocket`), on a connection of
/// its own, for `authgate proxy`: libcurl opens the connection (`CURLOPT_CONNECT_ONLY`: TCP, and
/// TLS verified as ``StreamedExchanges``' is, with the same CAs, protocols and connect timeout)
/// and hands it over; the request's head is written here as HTTP/1.1 and the answer's head read
/// back. After a `101` the connection is a byte stream both ways (``send(_:)``,
/// ``receive(into:)``, polled on ``socket``); any other answer's body is read with
/// ``readBody(_:)``, and the connection is then done.
///
/// Not Sendable: one thread drives a connection from its opening to its end.
public final class UpstreamConnection {
    /// The answer's status (never a 1xx other than 101: those are skipped).
    public private(set) var status = 0
    /// The answer's header fields, names as received, in order.
    public private(set) var headers: [(name: String, value: String)] = []
    /// The connection's socket, for poll(2); libcurl owns it and closes it.
    public let socket: Int32

    private let handle: UnsafeMutableRawPointer
    private let method: String
    private let url: URL
    private let idleSeconds: Int
    /// What was read past the answer's head and not taken yet.
    private var buffered: [UInt8] = []

    /// How far a send or a receive got.
    public enum Transfer: Equatable, Sendable {
        /// This many bytes moved (never 0).
        case moved(Int)
        /// Nothing can move now: poll the socket.
        case wouldBlock
        /// The upstream closed the connection (a receive only).
        case closed
        /// The connection broke.
        case failed
    }

    /// The longest answer head taken.
    static let maximumHeadBytes = 64 << 10

    /// Connects to `request.url`'s origin, sends the request's head (its method, the URL's path
    /// and query, `Host`, then `request.headers` as they are: `Connection` and `Upgrade` among
    /// them), and reads the answer's head.
    /// - Throws: ``HTTPTransportError`` when the URL is refused, no connection could be made, a
    ///   field would break the head, or no complete head came within the idle time.
    public init(upgrading request: StreamedRequest, policy: StreamPolicy) throws(HTTPTransportError) {
        guard policy.requestPolicy.allows(request.url) else {
            throw HTTPTransportError(.forbiddenURL, "\(request.url.scheme ?? "a scheme-less") URL refused: only https (or http to 127.0.0.1/::1)")
        }
        let head = try Self.head(of: request)
        _ = CurlTransport()  // curl_global_init, once per process
        guard let easy = ag_curl_easy_init() else { throw .noHandle() }
        var failures = CurlBaseline.apply(
            to: easy,
            url: request.url,
            allowInsecureLoopback: policy.allowInsecureLoopback,
            caBundle: policy.caBundle,
            connectTimeoutMilliseconds: policy.connectTimeoutMilliseconds
        )
        func set(_ code: CURLcode) { if code != CURLE_OK { failures.append(code) } }
        // TLS offers only http/1.1 (ALPN): the head written here is HTTP/1.1, and an upgrade is too.
        set(ag_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)))
        set(ag_curl_setopt_long(easy, CURLOPT_CONNECT_ONLY, 1))
        guard failures.isEmpty else {
            ag_curl_easy_cleanup(easy)
            throw .refusedOption(failures[0])
        }
        let code = ag_curl_easy_perform(easy)
        var descriptor: curl_socket_t = -1
        guard code == CURLE_OK, ag_curl_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &descriptor) == CURLE_OK, descriptor >= 0 else {
            ag_curl_easy_cleanup(easy)
            throw StreamedExchanges.error(for: code == CURLE_OK ? CURLE_COULDNT_CONNECT : code, url: request.url)
        }
        handle = easy
        socket = descriptor
        method = request.method.uppercased()
        url = request.url
        idleSeconds = policy.idleTimeoutSeconds
        try sendAll(head)
        try readHead()
    }

    deinit { ag_curl_easy_cleanup(handle) }

    /// Sends what it can of `bytes` without waiting.
    public func send(_ bytes: UnsafeRawBufferPointer) -> Transfer {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .moved(0) }
        var sent = 0
        let code = ag_curl_easy_send(handle, base, bytes.count, &sent)
        if code == CURLE_AGAIN { return .wouldBlock }
        guard code == CURLE_OK else { return .failed }
        return sent > 0 ? .moved(sent) : .wouldBlock
    }

    /// Receives what has arrived, without waiting: first what came with the answer's head.
    /// TLS may hold bytes the socket no longer shows: poll only after a `.wouldBlock`.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Transfer {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .moved(0) }
        if !buffered.isEmpty {
            let count = min(buffer.count, buffered.count)
            buffered.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: count) }
            buffered.removeFirst(count)
            return .moved(count)
        }
        var received = 0
        let code = ag_curl_easy_recv(handle, base, buffer.count, &received)
        if code == CURLE_AGAIN { return .wouldBlock }
        guard code == CURLE_OK else { return .failed }
        return received > 0 ? .moved(received) : .closed
    }

    /// Waits until the socket can take (`POLLOUT`) or give (`POLLIN`) bytes, at most the idle time.
    private func wait(for events: Int16) -> Bool {
        var watched = pollfd(fd: socket, events: events, revents: 0)
        while true {
            let ready = poll(&watched, 1, Int32(idleSeconds * 1000))
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }

    private func sendAll(_ bytes: [UInt8]) throws(HTTPTransportError) {
        var offset = 0
        while offset < bytes.count {
            let outcome = bytes.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            switch outcome {
            case .moved(let count): offset += count
            case .wouldBlock:
                guard wait(for: Int16(POLLOUT)) else { throw HTTPTransportError(.timedOut, "\(url.host ?? "the upstream") took no request") }
            case .closed, .failed: throw HTTPTransportError(.other, "the connection to \(url.host ?? "the upstream") broke")
            }
        }
    }

    /// Receives, waiting at most the idle time: `nil` at the connection's end.
    private func receiveWaiting(into piece: inout [UInt8]) throws(HTTPTransportError) -> Int? {
        while true {
            switch piece.withUnsafeMutableBytes({ receive(into: $0) }) {
            case .moved(let count): return count
            case .closed: return nil
            case .failed: throw HTTPTransportError(.other, "the connection to \(url.host ?? "the upstream") broke")
            case .wouldBlock:
                guard wait(for: Int16(POLLIN)) else { throw HTTPTransportError(.timedOut, "\(url.host ?? "the upstream") stopped answering") }
            }
        }
    }

    /// Reads heads until one that is not an informational answer (101 is final here).
    private func readHead() throws(HTTPTransportError) {
        var piece = [UInt8](repeating: 0, count: 16 << 10)
        var text: [UInt8] = []
        while true {
            if let end = Self.headEnd(text) {
                let (status, fields) = Self.parseHead(text[..<end])
                text.removeFirst(end + 4)
                guard status >= 100 else { throw HTTPTransportError(.other, "\(url.host ?? "the upstream") sent no HTTP answer") }
                if status < 200 && status != 101 { continue }
                self.status = status
                headers = fields
                buffered = text
                return
            }
            guard text.count <= Self.maximumHeadBytes else { throw HTTPTransportError(.other, "\(url.host ?? "the upstream") sent an answer head over 64 KiB") }
            guard let count = try receiveWaiting(into: &piece) else {
                throw HTTPTransportError(.other, "\(url.host ?? "the upstream") sent no complete answer")
            }
            text += piece.prefix(count)
        }
    }

    /// Reads the body of an answer other than 101 (by its chunked coding, its Content-Length,
    /// or to the connection's end) and hands it to `sink` in pieces; `sink` returns `false` to
    /// stop. Waits at most the idle time for each piece.
    public func readBody(_ sink: (UnsafeRawBufferPointer) -> Bool) throws(HTTPTransportError) {
        guard method != "HEAD", status != 204, status != 304 else { return }
        var piece = [UInt8](repeating: 0, count: 64 << 10)
        func more() throws(HTTPTransportError) -> Bool {
            guard let count = try receiveWaiting(into: &piece) else { return false }
            buffered += piece.prefix(count)
            return true
        }
        func pass(_ count: Int) throws(HTTPTransportError) {
            let ok = buffered.withUnsafeBytes { sink(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
            buffered.removeFirst(count)
            guard ok else { throw HTTPTransportError(.other, "the client went away") }
        }
        func line() throws(HTTPTransportError) -> String {
            while true {
                if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    let text = String(decoding: buffered[..<newline], as: UTF8.self)
                    buffered.removeFirst(newline + 1)
                    return text.trimming(while: \.isWhitespace)
                }
                guard buffered.count < 8192, try more() else { throw HTTPTransportError(.other, "the upstream's chunked body broke off") }
            }
        }
        let fields = headers.map { (name: $0.name.lowercased(), value: $0.value) }
        if fields.contains(where: { $0.name == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) {
            while true {
                let sizeLine = try line()
                guard var left = Int(String(sizeLine.prefix { $0 != ";" }).trimming(while: \.isWhitespace), radix: 16), left >= 0 else {
                    throw HTTPTransportError(.other, "the upstream's chunked body broke off")
                }
                if left == 0 {
                    while try !line().isEmpty {}  // trailers, to the empty line
                    return
                }
                while left > 0 {
                    if buffered.isEmpty, try !more() { throw HTTPTransportError(.other, "the upstream's chunked body broke off") }
                    let count = min(left, buffered.count)
                    try pass(count)
                    left -= count
                }
                _ = try line()
            }
        }
        if let length = fields.first(where: { $0.name == "content-length" }).flatMap({ Int($0.value.trimming(while: \.isWhitespace)) }) {
            var left = length
            while left > 0 {
                if buffered.isEmpty, try !more() { throw HTTPTransportError(.other, "the upstream's answer broke off") }
                let count = min(left, buffered.count)
                try pass(count)
                left -= count
            }
            return
        }
        while true {
            if !buffered.isEmpty { try pass(buffered.count) }
            guard try more() else { return }
        }
    }

    /// The request's head as HTTP/1.1 bytes.
    static func head(of request: StreamedRequest) throws(HTTPTransportError) -> [UInt8] {
        let url = request.url
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        let target = path + (url.query(percentEncoded: true).map { "?" + $0 } ?? "")
        var host = url.host(percentEncoded: true) ?? ""
        if host.contains(":") && !host.hasPrefix("[") { host = "[\(host)]" }
        if let port = url.port { host += ":\(port)" }
        let fields = [(name: "Host", value: host)] + request.headers
        // A line break or a NUL would end the head early: another request in this one's place.
        // (Bytes, not Characters: "\r\n" is one Character, equal to neither "\r" nor "\n".)
        func breaks(_ text: String, orSpace: Bool = false) -> Bool {
            text.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 || (orSpace && $0 == 32) }
        }
        guard !breaks(request.method, orSpace: true), !breaks(target, orSpace: true),
            !fields.contains(where: { breaks($0.name) || breaks($0.value) })
        else { throw HTTPTransportError(.other, "a header field of the request holds a line break") }
        var text = "\(request.method) \(target) HTTP/1.1\r\n"
        for field in fields { text += "\(field.name): \(field.value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// Where the head's blank line starts, if it has come.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// The status and fields of a head (without its blank line); status 0 when it is not HTTP.
    static func parseHead(_ bytes: ArraySlice<UInt8>) -> (status: Int, fields: [(name: String, value: String)]) {
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        guard let first = lines.first, first.hasPrefix("HTTP/1.") else { return (0, []) }
        let status = first.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            if let character = line.first, character == " " || character == "\t", !fields.isEmpty {
                // An obsolete folded line (RFC 9112 §5.2) continues the previous field.
                fields[fields.count - 1].value += " " + line.trimming(while: \.isWhitespace)
            } else if let colon = line.firstIndex(of: ":") {
                fields.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimming(while: \.isWhitespace)))
            }
        }
        return (status, fields)
    }
}
