import AuthGateClient
import AuthGateCore
import AuthGateHTTP

/// An answer the proxy gives itself, instead of the upstream's: a status, a stable reason (in
/// the `AuthGate-Reason` field, for scripts) and one sentence (the body, for people). Never a
/// token, and never the request's target (its query may hold a secret).
public struct ProxyAnswer: Sendable, Equatable {
    public var status: Int
    /// Stable, snake_case: what a script branches on.
    public var reason: String
    public var sentence: String
    /// Seconds to wait before trying again (`Retry-After`).
    public var retryAfterSeconds: Int?

    public init(status: Int, reason: String, sentence: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.reason = reason
        self.sentence = sentence
        self.retryAfterSeconds = retryAfterSeconds
    }

    static func connectRefused(_ upstream: UpstreamOrigin) -> ProxyAnswer {
        ProxyAnswer(status: 405, reason: "connect_refused", sentence: "authgate proxy serves only \(upstream.origin) and opens no tunnels (CONNECT).")
    }

    /// TRACE echoes the request back, the session's token with it: a client must not send
    /// credentials in one (RFC 9110 §9.3.8).
    static let traceRefused = ProxyAnswer(
        status: 405,
        reason: "trace_refused",
        sentence: "authgate proxy does not send TRACE: its answer would show the session's token."
    )

    /// A path with `.` or `..` segments, which would leave `--upstream`'s path once resolved.
    static let dotSegments = ProxyAnswer(
        status: 400,
        reason: "bad_request",
        sentence: "authgate proxy takes no path with . or .. segments: it keeps requests under --upstream's path."
    )

    static func otherOrigin(_ upstream: UpstreamOrigin) -> ProxyAnswer {
        ProxyAnswer(status: 403, reason: "other_origin", sentence: "authgate proxy forwards only to \(upstream.origin), not to other origins.")
    }

    static let badTarget = ProxyAnswer(
        status: 400,
        reason: "bad_request",
        sentence: "authgate proxy takes a path (/…) or a URL of its upstream as the request target."
    )

    /// A connection refused because its process runs as a uid the proxy does not serve.
    public static func callerRefused(uid: UInt32?) -> ProxyAnswer {
        ProxyAnswer(
            status: 403,
            reason: "caller_refused",
            sentence: uid.map { "authgate proxy serves its own user's programs, not uid \($0)'s (see --allow-uid)." }
                ?? "authgate proxy could not tell which user connected, so it refused the connection."
        )
    }

    static let tooManyConnections = ProxyAnswer(
        status: 503,
        reason: "too_many_connections",
        sentence: "authgate proxy is serving as many connections as it may (--max-connections); try again shortly.",
        retryAfterSeconds: 1
    )

    /// Every upgrade thread is taken (``ProxyCore/upgradeThreads``).
    static func tooManyUpgrades(_ limit: Int) -> ProxyAnswer {
        ProxyAnswer(
            status: 503,
            reason: "too_many_upgrades",
            sentence: "authgate proxy runs at most \(limit) upgrades (WebSocket) at once, those whose client left before the upstream "
                + "answered included; try again shortly.",
            retryAfterSeconds: 1
        )
    }

    /// No thread could be started for a protocol upgrade's tunnel.
    static let noThread = ProxyAnswer(
        status: 503,
        reason: "no_thread",
        sentence: "authgate proxy could not start a thread for the tunnel (the system's limit on threads); try again shortly.",
        retryAfterSeconds: 1
    )

    /// The upstream gave no answer.
    static func upstreamFailed(_ error: HTTPTransportError) -> ProxyAnswer {
        switch error.kind {
        case .timedOut: ProxyAnswer(status: 504, reason: "upstream_timeout", sentence: "The upstream did not answer in time: \(error.message).")
        case .tls: ProxyAnswer(status: 502, reason: "upstream_tls", sentence: "The upstream's TLS could not be verified: \(error.message).")
        case .cannotConnect: ProxyAnswer(status: 502, reason: "upstream_unreachable", sentence: "The upstream is unreachable: \(error.message).")
        default: ProxyAnswer(status: 502, reason: "upstream_failed", sentence: "The upstream gave no answer: \(error.message).")
        }
    }

    /// The daemon gave no token (or no proof) for the request.
    static func noToken(_ error: AuthGateClientError, provider: String, session: String?) -> ProxyAnswer {
        let sessionFlag = session.map { " --session \($0)" } ?? ""
        if error.isDaemonUnreachable {
            return ProxyAnswer(status: 503, reason: "daemon_unreachable", sentence: "authgated is not reachable: \(error.message)")
        }
        switch error.reason {
        case .loginRequired:
            return ProxyAnswer(
                status: 503,
                reason: "login_required",
                sentence: "No session for \(provider): sign in with `authgate login \(provider)\(sessionFlag)`, then send the request again."
            )
        case .consentDenied, .permissionDenied:
            return ProxyAnswer(status: 403, reason: error.reason?.rawValue ?? "permission_denied", sentence: error.message)
        case .rateLimited, .serviceUnavailable, .providerUnavailable, .networkError:
            return ProxyAnswer(
                status: 503,
                reason: error.reason?.rawValue ?? "service_unavailable",
                sentence: error.message,
                retryAfterSeconds: error.retryAfterSeconds
            )
        default:
            return ProxyAnswer(status: 502, reason: error.reason?.rawValue ?? "daemon_error", sentence: error.message)
        }
    }

    /// The answer's bytes: the sentence and a newline.
    var body: [UInt8] { Array((sentence + "\n").utf8) }

    /// The answer's header fields.
    var fields: [(name: String, value: String)] {
        var fields = [
            (name: "Content-Type", value: "text/plain; charset=utf-8"),
            (name: "Content-Length", value: String(body.count)),
            (name: "AuthGate-Reason", value: reason),
            (name: "Cache-Control", value: "no-store"),
        ]
        if let retryAfterSeconds { fields.append((name: "Retry-After", value: String(retryAfterSeconds))) }
        return fields
    }

    /// The whole answer as HTTP/1.1 bytes, with `Connection: close`: for a connection refused
    /// before it reaches the HTTP codec.
    public var closingBytes: [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.phrase(status))\r\n"
        for field in fields { head += "\(field.name): \(field.value)\r\n" }
        head += "Connection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    static func phrase(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 403: "Forbidden"
        case 405: "Method Not Allowed"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Error"
        }
    }
}
