import AuthGateCore
internal import CCurl
import FoundationEssentials
internal import NIOPosix

/// ``HTTPTransport`` over libcurl: the only code that touches curl.
///
/// Each request gets its own easy handle on a thread of a blocking pool, so the event loops
/// never wait for a provider. On every handle: only https (plain http only to
/// 127.0.0.1/::1 when the policy allows it), peer and host verification on, the policy's CA
/// file and timeouts, no redirects (a token endpoint must not send credentials elsewhere), no
/// signals, a byte cap enforced while the body arrives, and never `CURLOPT_VERBOSE`, which
/// would print Authorization headers.
public struct CurlTransport: HTTPTransport {
    public init() {
        Self.globalInit
    }

    /// `curl_global_init` exactly once per process, before any handle exists.
    private static let globalInit: Void = {
        ag_curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    /// The threads that wait for providers. NIO's shared pool has one thread per core (two
    /// here), so one slow provider would hold up half of all provider traffic; 16 threads let
    /// that many requests wait at once. They live as long as the process.
    private static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 16)
        pool.start()
        return pool
    }()

    public func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse {
        guard policy.allows(request.url) else {
            throw HTTPTransportError(.forbiddenURL, "\(request.url.scheme ?? "a scheme-less") URL refused: only https (or http to 127.0.0.1/::1 when allowed)")
        }
        do {
            return try await Self.pool.runIfActive { try Self.perform(request, policy: policy) }
        } catch let error as HTTPTransportError {
            throw error
        } catch {
            throw HTTPTransportError(.other, "the request could not be run: \(error)")
        }
    }

    /// Runs one request to completion on the calling (pool) thread.
    private static func perform(_ request: HTTPRequest, policy: HTTPRequestPolicy) throws(HTTPTransportError) -> HTTPResponse {
        guard let handle = ag_curl_easy_init() else { throw .noHandle() }
        defer { ag_curl_easy_cleanup(handle) }
        let sink = ResponseSink(limit: policy.maximumResponseBytes)
        let context = Unmanaged.passRetained(sink)
        defer { context.release() }

        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { ag_curl_slist_free_all(headerList) }
        for (name, value) in request.headers {
            headerList = ag_curl_slist_append(headerList, "\(name): \(value)")
        }
        // curl adds "Expect: 100-continue" to larger POSTs; providers do not need the extra round trip.
        headerList = ag_curl_slist_append(headerList, "Expect:")

        var failures = CurlBaseline.apply(
            to: handle,
            url: request.url,
            allowInsecureLoopback: policy.allowInsecureLoopback,
            caBundle: policy.caBundle,
            connectTimeoutMilliseconds: policy.connectTimeoutMilliseconds
        )
        func set(_ code: CURLcode) { if code != CURLE_OK { failures.append(code) } }
        if let client = policy.clientCertificate {
            // Both PEM, copied by libcurl: curl never opens the files (see caBundle).
            set(ag_curl_setopt_string(handle, CURLOPT_SSLCERTTYPE, "PEM"))
            set(ag_curl_setopt_string(handle, CURLOPT_SSLKEYTYPE, "PEM"))
            client.certificate.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress { set(ag_curl_setopt_blob(handle, CURLOPT_SSLCERT_BLOB, base, bytes.count)) }
            }
            client.key.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress { set(ag_curl_setopt_blob(handle, CURLOPT_SSLKEY_BLOB, base, bytes.count)) }
            }
        }
        set(ag_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, policy.totalTimeoutMilliseconds))
        set(ag_curl_setopt_long(handle, CURLOPT_MAXFILESIZE_LARGE, policy.maximumResponseBytes))
        set(ag_curl_setopt_string(handle, CURLOPT_USERAGENT, "authgate"))
        set(ag_curl_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, ""))
        set(ag_curl_setopt_headers(handle, headerList))
        set(ag_curl_setopt_callback(handle, CURLOPT_WRITEFUNCTION, ResponseSink.writeBody))
        set(ag_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context.toOpaque()))
        set(ag_curl_setopt_callback(handle, CURLOPT_HEADERFUNCTION, ResponseSink.writeHeader))
        set(ag_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context.toOpaque()))
        if request.method == .post {
            set(ag_curl_setopt_long(handle, CURLOPT_POST, 1))
            set(ag_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, request.body.count))
            // COPYPOSTFIELDS copies the bytes now; the trailing NUL only keeps the pointer
            // non-nil for an empty body (POSTFIELDSIZE says how much to send).
            set(
                (request.body + [0]).withUnsafeBytes { bytes in
                    ag_curl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                }
            )
        }
        if request.method == .delete {
            // A DELETE without a body (RFC 7592 §2.3): curl's GET with the method name replaced.
            set(ag_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, "DELETE"))
        }
        guard failures.isEmpty else {
            throw .refusedOption(failures[0])
        }

        let code = ag_curl_easy_perform(handle)
        guard code == CURLE_OK else { throw error(for: code, sink: sink, url: request.url) }
        var status = 0
        _ = ag_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return HTTPResponse(status: status, headers: sink.headers, body: sink.body)
    }

    /// Turns a curl failure into one a user can act on: an answer over the size limit, else
    /// the module's one table (``HTTPTransportError/curl(_:url:server:timedOut:)``).
    private static func error(for code: CURLcode, sink: ResponseSink, url: URL) -> HTTPTransportError {
        if code == CURLE_FILESIZE_EXCEEDED || (code == CURLE_WRITE_ERROR && sink.overflowed) {
            return HTTPTransportError(.responseTooLarge, "\(url.host ?? "the provider") sent a response larger than \(sink.limit) bytes")
        }
        return .curl(code, url: url, server: "the provider", timedOut: "did not answer in time")
    }
}

/// Collects a response for curl's callbacks; lives on the one thread that performs the request.
private final class ResponseSink {
    let limit: Int
    var body: [UInt8] = []
    var headers: [String: String] = [:]
    var overflowed = false

    init(limit: Int) {
        self.limit = limit
    }

    static let writeBody: ag_curl_data_callback = { data, size, count, context in
        let sink = Unmanaged<ResponseSink>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        guard sink.body.count + length <= sink.limit else {
            sink.overflowed = true
            return 0  // anything but `length` makes curl stop with CURLE_WRITE_ERROR
        }
        sink.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
        return length
    }

    static let writeHeader: ag_curl_data_callback = { data, size, count, context in
        let sink = Unmanaged<ResponseSink>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            sink.headers.removeAll()  // a new response (e.g. after 100 Continue) starts over
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            sink.headers[name] = String(line[line.index(after: colon)...]).trimming(while: \.isWhitespace)
        }
        return length
    }
}
