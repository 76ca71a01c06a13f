public import AuthGateClient
import AuthGateServer
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// What `authgate proxy` serves, where, and to whom.
public struct ProxyConfiguration: Sendable {
    /// The provider whose session authorizes the requests.
    public var provider: String
    /// The session's name; the default session when `nil`.
    public var session: String?
    /// A token for an audience, a resource or fewer scopes instead of the session's own.
    public var variant: TokenVariantChoice?
    /// The one origin requests go to.
    public var upstream: UpstreamOrigin
    public var listen: ListenAddress
    /// Where to serve the counts for Prometheus (`GET /metrics`), if anywhere.
    public var metricsListen: ListenAddress?
    /// Uids besides the proxy's own whose connections are served.
    public var allowedUIDs: Set<UInt32>
    /// With a Unix socket: the group given read and write on it (mode 0660 instead of 0600).
    public var socketGroup: UInt32?
    /// Serve a non-loopback address, whose callers cannot be told apart.
    public var allowsRemoteCallers: Bool
    /// CAs to trust for the upstream instead of the system's (PEM).
    public var caBundle: [UInt8]?
    /// The least validity, in seconds, a token gets when it is sent.
    public var minimumValidity: Int
    /// Client connections served at once; more are answered 503 and closed.
    public var maximumConnections: Int
    /// A connection with no request under way is closed after this many seconds.
    public var idleSeconds: Int
    /// A request's head must arrive within this many seconds of the connection's start or of
    /// the previous answer's end (slow headers, or a connection opened and left, are closed).
    public var headerSeconds: Int

    public init(
        provider: String,
        session: String? = nil,
        variant: TokenVariantChoice? = nil,
        upstream: UpstreamOrigin,
        listen: ListenAddress,
        metricsListen: ListenAddress? = nil,
        allowedUIDs: Set<UInt32> = [],
        socketGroup: UInt32? = nil,
        allowsRemoteCallers: Bool = false,
        caBundle: [UInt8]? = nil,
        minimumValidity: Int = 30,
        maximumConnections: Int = 64,
        idleSeconds: Int = 120,
        headerSeconds: Int = 30
    ) {
        self.provider = provider
        self.session = session
        self.variant = variant
        self.upstream = upstream
        self.listen = listen
        self.metricsListen = metricsListen
        self.allowedUIDs = allowedUIDs
        self.socketGroup = socketGroup
        self.allowsRemoteCallers = allowsRemoteCallers
        self.caBundle = caBundle
        self.minimumValidity = minimumValidity
        self.maximumConnections = maximumConnections
        self.idleSeconds = idleSeconds
        self.headerSeconds = headerSeconds
    }
}

/// Where the proxy listens: `HOST:PORT` (an IPv6 host in brackets) or `unix:PATH`.
public enum ListenAddress: Sendable, Hashable, CustomStringConvertible {
    case tcp(host: String, port: Int)
    case unix(path: String)

    /// - Throws: ``ProxyConfigurationError`` with the sentence to show.
    public init(parsing text: String) throws(ProxyConfigurationError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard path.hasPrefix("/"), path.utf8.count < 108 else {
                throw ProxyConfigurationError("--listen unix:PATH needs an absolute path shorter than 108 bytes")
            }
            self = .unix(path: path)
            return
        }
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ProxyConfigurationError("--listen takes HOST:PORT (e.g. 127.0.0.1:8787) or unix:PATH, not \(text.debugDescription)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard IPAddress(host) != nil else {
            throw ProxyConfigurationError("--listen needs a numeric address (127.0.0.1 or [::1]), not \(host.debugDescription)")
        }
        self = .tcp(host: host, port: port)
    }

    /// Whether only this machine can connect: a Unix socket, 127.0.0.0/8 or ::1.
    public var isLocal: Bool {
        switch self {
        case .unix: return true
        case .tcp(let host, _): return IPAddress(host)?.isLoopback ?? false
        }
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}

/// The upstream's scheme, host, port and path prefix: `https://api.example.com/v1` sends
/// `/users` to `https://api.example.com/v1/users`.
public struct UpstreamOrigin: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    /// Lower case; an IPv6 address without brackets.
    public var host: String
    public var port: Int
    /// Empty, or starting with `/` and not ending with one.
    public var pathPrefix: String

    /// - Throws: ``ProxyConfigurationError`` unless `text` is an https URL (or http to
    ///   127.0.0.1 / ::1) with a host and no query, fragment or user info.
    public init(parsing text: String) throws(ProxyConfigurationError) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host(percentEncoded: false)?.lowercased(), !host.isEmpty
        else { throw ProxyConfigurationError("--upstream needs an absolute URL such as https://api.example.com") }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        switch scheme {
        case "https": break
        case "http" where IPAddress(bare)?.isLoopback == true: break
        case "http": throw ProxyConfigurationError("--upstream must be https (plain http only to 127.0.0.1 or ::1): the token would cross the network in clear")
        default: throw ProxyConfigurationError("--upstream must be an https URL")
        }
        guard url.query == nil, url.fragment == nil, url.user == nil, url.password == nil else {
            throw ProxyConfigurationError("--upstream takes no query, fragment or user info")
        }
        self.scheme = scheme
        self.host = bare
        port = url.port ?? (scheme == "https" ? 443 : 80)
        var path = url.path(percentEncoded: true)
        while path.hasSuffix("/") { path.removeLast() }
        pathPrefix = path
    }

    /// `scheme://host:port`, the default port left out.
    public var origin: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return port == defaultPort ? "\(scheme)://\(shownHost)" : "\(scheme)://\(shownHost):\(port)"
    }

    public var description: String { origin + pathPrefix }

    /// Whether an absolute-form request target names this origin (scheme, host and port).
    func isSameOrigin(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), var host = url.host(percentEncoded: false)?.lowercased() else { return false }
        if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
        return scheme == self.scheme && host == self.host && (url.port ?? (scheme == "https" ? 443 : 80)) == port
    }
}

/// A flag's value the proxy cannot serve, with the sentence to show.
public struct ProxyConfigurationError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
