internal import CCurl
import FoundationEssentials

/// The options every libcurl handle of this module gets, whatever it carries (a provider's
/// request, a proxied exchange, an upgrade's connection): the URL; https only, or plain http
/// too when the caller allows it (loopback only: ``HTTPRequestPolicy/allows(_:)`` is checked
/// first), and plain http never through a proxy of the environment (`http_proxy`: it would read
/// the request, token and all, and could not reach this host's loopback anyway); no redirects
/// followed; peer and host verification on, with the given CAs instead of the system's, in
/// memory; no signals; the connect timeout. One place, so that no handle can lose one of them.
enum CurlBaseline {
    /// Sets the options on `handle`; returns the codes of those libcurl refused.
    static func apply(
        to handle: UnsafeMutableRawPointer,
        url: URL,
        allowInsecureLoopback: Bool,
        caBundle: [UInt8]?,
        connectTimeoutMilliseconds: Int
    ) -> [CURLcode] {
        var failures: [CURLcode] = []
        func set(_ code: CURLcode) { if code != CURLE_OK { failures.append(code) } }
        set(ag_curl_setopt_string(handle, CURLOPT_URL, url.absoluteString))
        set(ag_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, allowInsecureLoopback ? "http,https" : "https"))
        if url.scheme?.lowercased() == "http" { set(ag_curl_setopt_string(handle, CURLOPT_PROXY, "")) }
        set(ag_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0))
        set(ag_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
        set(ag_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
        if let caBundle {
            caBundle.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress { set(ag_curl_setopt_blob(handle, CURLOPT_CAINFO_BLOB, base, bytes.count)) }
            }
        }
        set(ag_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        set(ag_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMilliseconds))
        return failures
    }
}

extension HTTPTransportError {
    /// No handle: libcurl, opened on first use (CCurl), is missing or unusable — the sentence
    /// names dlopen's reason and the package that brings it — or it could not allocate one.
    static func noHandle() -> HTTPTransportError {
        if let reason = ag_curl_unavailable() {
            return HTTPTransportError(.other, "libcurl could not be loaded (\(String(cString: reason))): install libcurl4")
        }
        return HTTPTransportError(.other, "libcurl could not create a handle")
    }

    /// libcurl refused to set an option (``CurlBaseline/apply(to:url:allowInsecureLoopback:caBundle:connectTimeoutMilliseconds:)``
    /// or a caller's own): the first refusal's sentence.
    static func refusedOption(_ code: CURLcode) -> HTTPTransportError {
        HTTPTransportError(.other, "libcurl refused an option: \(String(cString: ag_curl_easy_strerror(code)))")
    }

    /// A request to `url` that libcurl ended with `code`, as a sentence a user can act on: the
    /// one table of a provider's requests (``CurlTransport``) and the proxy's exchanges
    /// (``StreamedExchanges``, ``UpstreamConnection``).
    /// - Parameters:
    ///   - server: what to call the server of a URL without a host ("the provider", "the upstream").
    ///   - timedOut: how a timeout ends the sentence: a provider's request has a deadline for
    ///     the whole answer, an exchange fails when no byte has moved for a while.
    static func curl(_ code: CURLcode, url: URL, server: String, timedOut: String) -> HTTPTransportError {
        let host = (url.host ?? server) + (url.port.map { ":\($0)" } ?? "")
        let reason = String(cString: ag_curl_easy_strerror(code))
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return HTTPTransportError(.cannotConnect, "cannot resolve \(url.host ?? server) (offline, or DNS failed)")
        case CURLE_COULDNT_CONNECT:
            return HTTPTransportError(.cannotConnect, "cannot connect to \(host) (nothing answers, or the network is down)")
        case CURLE_OPERATION_TIMEDOUT:
            return HTTPTransportError(.timedOut, "\(host) \(timedOut)")
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM:
            return HTTPTransportError(.tls, "the TLS connection to \(host) failed: \(reason)")
        case CURLE_UNSUPPORTED_PROTOCOL:
            return HTTPTransportError(.forbiddenURL, "the URL's scheme is not allowed")
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
            return HTTPTransportError(.other, "the connection to \(host) broke: \(reason)")
        default:
            return HTTPTransportError(.other, "the request to \(host) failed: \(reason)")
        }
    }
}
