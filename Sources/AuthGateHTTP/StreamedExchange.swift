import AuthGateCore
internal import CCurl
public import FoundationEssentials
import NIOPosix

/// One HTTP request whose body and answer stream through libcurl on the calling thread, for
/// `authgate proxy`: the request's body is pulled from ``StreamedRequestBody`` as curl sends it,
/// and the answer is pushed to ``StreamedResponseSink`` as it arrives, so a body of any size
/// costs the proxy only the buffers in between.
///
/// The rules of ``CurlTransport`` hold here too (peer and host verification, https only, plain
/// http only to 127.0.0.1/::1 when the policy allows it, no redirects followed, no signals,
/// never `CURLOPT_VERBOSE`), with two differences a proxy needs: the method is any token the
/// client sent, and instead of a total timeout an exchange fails when no byte moves for
/// ``StreamPolicy/idleTimeoutSeconds`` (a download of many minutes is fine, a stalled one is not).
public struct StreamedRequest: Sendable {
    /// The method as the client sent it (`GET`, `PROPFIND`, …).
    public var method: String
    public var url: URL
    /// Header lines as sent; never logged (they carry `Authorization`).
    public var headers: [(name: String, value: String)]
    /// The body's length: `nil` for no body, `-1` for a body of unknown length (sent chunked).
    public var bodyLength: Int64?

    public init(method: String, url: URL, headers: [(name: String, value: String)], bodyLength: Int64?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.bodyLength = bodyLength
    }
}

/// Where a streamed request's body comes from. Called on the thread running the exchange.
public protocol StreamedRequestBody: AnyObject {
    /// Fills `buffer` with the next bytes, waiting for them if need be: the count written, 0 at
    /// the body's end, or `nil` to abort the exchange (the client went away).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int?
}

/// Where a streamed answer goes. Called on the thread running the exchange.
public protocol StreamedResponseSink: AnyObject {
    /// The answer's status and header fields (names as received, in order, repeated ones kept),
    /// once they are complete (informational 1xx answers are left out). Returns whether to
    /// pass the body on; `false` reads and drops it (an answer that will be retried).
    func head(status: Int, headers: [(name: String, value: String)]) -> Bool
    /// A piece of the body; may wait until the client has taken what came before. Returns
    /// `false` to abort the exchange.
    func body(_ bytes: UnsafeRawBufferPointer) -> Bool
}

/// The trust and patience of a streamed exchange.
public struct StreamPolicy: Sendable {
    /// A PEM bundle of CAs to trust instead of the system's.
    public var caBundle: [UInt8]?
    public var connectTimeoutMilliseconds: Int
    /// The exchange fails when no byte has moved for this long.
    public var idleTimeoutSeconds: Int
    /// Allow plain http, but only to 127.0.0.1 and ::1.
    public var allowInsecureLoopback: Bool

    public init(caBundle: [UInt8]? = nil, connectTimeoutMilliseconds: Int = 10_000, idleTimeoutSeconds: Int = 120, allowInsecureLoopback: Bool = false) {
        self.caBundle = caBundle
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.allowInsecureLoopback = allowInsecureLoopback
    }

    var requestPolicy: HTTPRequestPolicy { HTTPRequestPolicy(caBundle: caBundle, allowInsecureLoopback: allowInsecureLoopback) }
}

/// Runs ``StreamedRequest``s, each thread on a libcurl handle of its own, reused (and with it
/// its open connections to the upstream: a handle keeps its connection cache across
/// `curl_easy_reset`) for as long as the thread lives. Per thread rather than from a shared
/// pool: under load, a pool's lock was taken twice per request by every exchange thread at once
/// (a fifth of the proxy's CPU at 32 connections, docs/BENCHMARKS.md).
public final class StreamedExchanges: Sendable {
    private let handles = ThreadSpecificVariable<EasyHandle>()

    public init() {
        _ = CurlTransport()  // curl_global_init, once per process
    }

    /// Runs one exchange to its end on the calling thread, which it blocks.
    /// - Throws: ``HTTPTransportError`` when no complete answer came (the sink may have had
    ///   its head and part of the body by then).
    public func perform(
        _ request: StreamedRequest,
        body: (any StreamedRequestBody)?,
        sink: any StreamedResponseSink,
        policy: StreamPolicy
    ) throws(HTTPTransportError) {
        guard policy.requestPolicy.allows(request.url) else {
            throw HTTPTransportError(.forbiddenURL, "\(request.url.scheme ?? "a scheme-less") URL refused: only https (or http to 127.0.0.1/::1)")
        }
        let handle = handles.currentValue ?? EasyHandle()
        guard let easy = handle.pointer else { throw .noHandle() }
        var reusable = false
        defer { handles.currentValue = reusable ? handle : nil }
        ag_curl_easy_reset(easy)
        let state = StreamState(body: body, sink: sink)
        let context = Unmanaged.passRetained(state)
        defer { context.release() }

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { ag_curl_slist_free_all(headerList) }
        for (name, value) in request.headers {
            headerList = ag_curl_slist_append(headerList, "\(name): \(value)")
        }
        // curl's own additions, left out unless the client sent them (a name with nothing after
        // the colon removes curl's header): the request goes on as the client made it.
        for name in ["Expect", "Accept"] where !request.headers.contains(where: { $0.name.lowercased() == name.lowercased() }) {
            headerList = ag_curl_slist_append(headerList, "\(name):")
        }
        if request.bodyLength == -1 {
            headerList = ag_curl_slist_append(headerList, "Transfer-Encoding: chunked")
        }

        var failures = CurlBaseline.apply(
            to: easy,
            url: request.url,
            allowInsecureLoopback: policy.allowInsecureLoopback,
            caBundle: policy.caBundle,
            connectTimeoutMilliseconds: policy.connectTimeoutMilliseconds
        )
        func set(_ code: CURLcode) { if code != CURLE_OK { failures.append(code) } }
        set(ag_curl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1))
        set(ag_curl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, policy.idleTimeoutSeconds))
        // The client's own Accept-Encoding goes on and the body comes back as the upstream sent it.
        set(ag_curl_setopt_headers(easy, headerList))
        set(ag_curl_setopt_callback(easy, CURLOPT_WRITEFUNCTION, StreamState.writeBody))
        set(ag_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, context.toOpaque()))
        set(ag_curl_setopt_callback(easy, CURLOPT_HEADERFUNCTION, StreamState.writeHeader))
        set(ag_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, context.toOpaque()))
        let method = request.method.uppercased()
        if method == "HEAD" {
            set(ag_curl_setopt_long(easy, CURLOPT_NOBODY, 1))
        } else if let length = request.bodyLength {
            // UPLOAD streams the body through the read callback; the method is then the client's.
            set(ag_curl_setopt_long(easy, CURLOPT_UPLOAD, 1))
            set(ag_curl_setopt_off_t(easy, CURLOPT_INFILESIZE_LARGE, length))
            set(ag_curl_setopt_callback(easy, CURLOPT_READFUNCTION, StreamState.readBody))
            set(ag_curl_setopt_pointer(easy, CURLOPT_READDATA, context.toOpaque()))
            set(ag_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method))
        } else if method != "GET" {
            set(ag_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method))
        }
        guard failures.isEmpty else {
            throw .refusedOption(failures[0])
        }
        let code = ag_curl_easy_perform(easy)
        if code == CURLE_OK, !state.headDelivered {
            // A complete answer that had no body reached the sink's head through the blank line;
            // one whose headers never ended is not complete.
            throw HTTPTransportError(.other, "\(request.url.host ?? "the upstream") sent no complete answer")
        }
        guard code == CURLE_OK else {
            if state.aborted { throw HTTPTransportError(.other, "the client went away") }
            throw Self.error(for: code, url: request.url)
        }
        reusable = true
    }

    /// The error a failed exchange (or connection) with `url` reports, as a sentence: the
    /// module's one table; a timeout here means no byte moved for the idle timeout.
    static func error(for code: CURLcode, url: URL) -> HTTPTransportError {
        .curl(code, url: url, server: "the upstream", timedOut: "stopped answering")
    }
}

/// A libcurl easy handle, freed with its owner.
private final class EasyHandle: @unchecked Sendable {
    // Only its thread's exchanges use a handle, one at a time.
    let pointer: UnsafeMutableRawPointer? = ag_curl_easy_init()

    deinit { if let pointer { ag_curl_easy_cleanup(pointer) } }
}

/// The state of one exchange for curl's callbacks, on the one thread that performs it.
private final class StreamState {
    let body: (any StreamedRequestBody)?
    let sink: any StreamedResponseSink
    var status = 0
    var headers: [(name: String, value: String)] = []
    var headDelivered = false
    var passesBody = true
    var aborted = false

    init(body: (any StreamedRequestBody)?, sink: any StreamedResponseSink) {
        self.body = body
        self.sink = sink
    }

    static let readBody: ag_curl_data_callback = { data, size, count, context in
        let state = Unmanaged<StreamState>.fromOpaque(context!).takeUnretainedValue()
        guard let body = state.body, let read = body.read(into: UnsafeMutableRawBufferPointer(start: data, count: size * count)) else {
            state.aborted = true
            return 0x1000_0000  // CURL_READFUNC_ABORT
        }
        return read
    }

    static let writeBody: ag_curl_data_callback = { data, size, count, context in
        let state = Unmanaged<StreamState>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        guard state.passesBody else { return length }
        guard state.headDelivered else {
            state.aborted = true
            return 0  // a body before the head's end: not an answer to pass on
        }
        guard state.sink.body(UnsafeRawBufferPointer(start: data, count: length)) else {
            state.aborted = true
            return 0  // anything but `length` makes curl stop
        }
        return length
    }

    static let writeHeader: ag_curl_data_callback = { data, size, count, context in
        let state = Unmanaged<StreamState>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        var line = Substring(String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self))
        // "\r\n" is one Character: isNewline covers it, "\n" and "\r".
        while let last = line.last, last.isNewline { line.removeLast() }
        if line.hasPrefix("HTTP/") {
            // A new answer (after 100 Continue, or a 103) starts over.
            state.headers.removeAll()
            state.status = line.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
        } else if line.isEmpty {
            guard !(100..<200).contains(state.status), !state.headDelivered else { return length }
            state.headDelivered = true
            state.passesBody = state.sink.head(status: state.status, headers: state.headers)
        } else if let first = line.first, first == " " || first == "\t", !state.headers.isEmpty {
            // An obsolete folded line (RFC 9112 §5.2) continues the previous field.
            state.headers[state.headers.count - 1].value += " " + String(line).trimming(while: \.isWhitespace)
        } else if let colon = line.firstIndex(of: ":") {
            state.headers.append((String(line[..<colon]), String(line[line.index(after: colon)...]).trimming(while: \.isWhitespace)))
        }
        return length
    }
}
