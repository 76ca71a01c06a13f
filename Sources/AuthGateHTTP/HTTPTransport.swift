import AuthGateCore
public import FoundationEssentials

/// An HTTP request to an identity provider.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable {
        case get = "GET"
        case post = "POST"
        /// RFC 7592 §2.3: deleting a dynamically registered client.
        case delete = "DELETE"
    }

    /// Which of a provider's endpoints a request is for: a label of the daemon's metrics
    /// (`authgate_provider_requests_total`), never sent.
    public enum Endpoint: String, Sendable, CaseIterable {
        case discovery
        /// The RFC 8414 authorization server metadata, read beside the discovery document.
        case serverMetadata = "server_metadata"
        case jwks
        case token
        case deviceAuthorization = "device_authorization"
        case userinfo
        case revocation
        case pushedAuthorization = "pushed_authorization"
        /// Dynamic client registration (RFC 7591) and its management (RFC 7592).
        case registration
    }

    public var method: Method
    public var url: URL
    public var endpoint: Endpoint
    /// Header lines; names as sent. Never logged: they may carry `Authorization`.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: Method, url: URL, endpoint: Endpoint, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.endpoint = endpoint
        self.headers = headers
        self.body = body
    }
}

/// An HTTP response.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header fields by lowercased name (the last one wins).
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `Retry-After` in seconds, given as a number or an HTTP date (RFC 9110 §10.2.3); else, for
    /// a 429, the seconds until `X-Rate-Limit-Reset`, the UTC epoch second at which Okta's
    /// rate-limit window resets (https://developer.okta.com/docs/reference/rl-best-practices/).
    /// Always 1 to 3600: a provider (or anything on the way) saying "in -5 s" or "in a year"
    /// is read as soon, or an hour.
    public var retryAfterSeconds: Int? {
        let now = Date()
        func bounded(_ seconds: Int) -> Int { max(1, min(3600, seconds)) }
        if let value = headers["retry-after"]?.trimming(while: \.isWhitespace) {
            if let seconds = Int(value) { return bounded(seconds) }
            if let date = UTCTimestamp.parseHTTPDate(String(value)) { return bounded(Int(date.timeIntervalSince(now).rounded(.up))) }
        }
        guard status == 429, let reset = headers["x-rate-limit-reset"].flatMap({ Int($0.trimming(while: \.isWhitespace)) }) else { return nil }
        let (seconds, overflow) = reset.subtractingReportingOverflow(Int(now.timeIntervalSince1970))
        return bounded(overflow ? (reset < 0 ? 1 : 3600) : seconds)
    }
}

/// How one request may be made: the provider's TLS trust, its timeouts, and the limits.
public struct HTTPRequestPolicy: Sendable, Hashable {
    /// A PEM bundle of CAs to trust instead of the system's, in memory (`CURLOPT_CAINFO_BLOB`).
    public var caBundle: [UInt8]?
    public var connectTimeoutMilliseconds: Int
    public var totalTimeoutMilliseconds: Int
    /// Allow plain http, but only to 127.0.0.1 and ::1 (tests).
    public var allowInsecureLoopback: Bool
    /// Bodies larger than this are refused while they arrive.
    public var maximumResponseBytes: Int
    /// A client certificate and its key for mutual TLS (RFC 8705), PEM, in memory
    /// (`CURLOPT_SSLCERT_BLOB`, `CURLOPT_SSLKEY_BLOB`).
    public var clientCertificate: ClientCertificate?

    public struct ClientCertificate: Sendable, Hashable, CustomStringConvertible {
        public var certificate: [UInt8]
        public var key: [UInt8]

        public init(certificate: [UInt8], key: [UInt8]) {
            self.certificate = certificate
            self.key = key
        }

        public var description: String { "ClientCertificate(<redacted>)" }
    }

    public init(
        caBundle: [UInt8]? = nil,
        connectTimeoutMilliseconds: Int = 3000,
        totalTimeoutMilliseconds: Int = 10_000,
        allowInsecureLoopback: Bool = false,
        maximumResponseBytes: Int = 1 << 20,
        clientCertificate: ClientCertificate? = nil
    ) {
        self.caBundle = caBundle
        self.clientCertificate = clientCertificate
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.totalTimeoutMilliseconds = totalTimeoutMilliseconds
        self.allowInsecureLoopback = allowInsecureLoopback
        self.maximumResponseBytes = maximumResponseBytes
    }
}

extension HTTPRequestPolicy {
    /// Only https, or plain http to 127.0.0.1 / ::1 when the policy allows it.
    public func allows(_ url: URL) -> Bool {
        let host = url.host?.trimming("[]")
        switch url.scheme?.lowercased() {
        case "https": return true
        case "http": return allowInsecureLoopback && (host == "127.0.0.1" || host == "::1")
        default: return false
        }
    }
}

/// Why a request got no HTTP response.
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// DNS failed, or nothing accepted the connection: the network or the host is down.
        case cannotConnect
        /// The connection or the whole exchange took longer than the policy allows.
        case timedOut
        /// TLS failed: the certificate could not be verified, or the handshake broke.
        case tls
        /// The response was larger than the policy allows.
        case responseTooLarge
        /// The URL is not allowed (not https, or http to anything but loopback).
        case forbiddenURL
        /// The connection broke, or another failure.
        case other
    }

    public var kind: Kind
    /// A sentence for logs and users; never contains headers or bodies.
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Sends HTTP requests to identity providers. ``CurlTransport`` is the real one.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse
}
