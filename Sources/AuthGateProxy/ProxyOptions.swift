import AuthGateClient
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `authgate proxy`'s options as they are typed: users and a group by name or number, the CAs
/// as a path, limits as given. ``ProxyConfiguration/init(resolving:)`` makes them what the
/// proxy serves.
public struct ProxyOptions: Sendable {
    public var provider: String
    public var session: String?
    /// `--upstream`: the origin and a path prefix.
    public var upstream: String
    /// `--scope`, `--resource`, `--audience`: a token exchanged or narrowed for them.
    public var scopes: [String]
    public var resource: String?
    public var audience: String?
    /// `--listen` and `--metrics-listen`: `HOST:PORT` or `unix:PATH`.
    public var listen: String
    public var metricsListen: String?
    /// `--allow-uid`: user names or uids.
    public var allowedUsers: [String]
    /// `--group`: a group name or gid.
    public var group: String?
    public var allowsRemoteCallers: Bool
    /// `--ca-file`: a PEM bundle's path.
    public var caFile: String?
    public var minimumValidity: Int
    public var maximumConnections: Int
    public var idleSeconds: Int
    public var headerSeconds: Int

    public init(
        provider: String,
        session: String? = nil,
        upstream: String,
        scopes: [String] = [],
        resource: String? = nil,
        audience: String? = nil,
        listen: String,
        metricsListen: String? = nil,
        allowedUsers: [String] = [],
        group: String? = nil,
        allowsRemoteCallers: Bool = false,
        caFile: String? = nil,
        minimumValidity: Int = 30,
        maximumConnections: Int = 64,
        idleSeconds: Int = 120,
        headerSeconds: Int = 30
    ) {
        self.provider = provider
        self.session = session
        self.upstream = upstream
        self.scopes = scopes
        self.resource = resource
        self.audience = audience
        self.listen = listen
        self.metricsListen = metricsListen
        self.allowedUsers = allowedUsers
        self.group = group
        self.allowsRemoteCallers = allowsRemoteCallers
        self.caFile = caFile
        self.minimumValidity = minimumValidity
        self.maximumConnections = maximumConnections
        self.idleSeconds = idleSeconds
        self.headerSeconds = headerSeconds
    }
}

extension ProxyConfiguration {
    /// The largest `--ca-file` read.
    static let caFileLimit = 4 << 20

    /// What `options` ask for: the addresses parsed, users and the group looked up (a name
    /// first, else a number), the CA file read and checked for a PEM certificate, a variant
    /// only when a scope, resource or audience is given, the connections held to 1…4096 and the
    /// timeouts to at least a second.
    /// - Throws: ``ProxyConfigurationError`` with the sentence to show, naming the option.
    public init(resolving options: ProxyOptions) throws(ProxyConfigurationError) {
        let variant =
            options.scopes.isEmpty && options.resource == nil && options.audience == nil
            ? nil : TokenVariantChoice(audience: options.audience, resource: options.resource, scopes: options.scopes.isEmpty ? nil : options.scopes)
        self.init(
            provider: options.provider,
            session: options.session,
            variant: variant,
            upstream: try UpstreamOrigin(parsing: options.upstream),
            listen: try ListenAddress(parsing: options.listen),
            metricsListen: try options.metricsListen.map { address throws(ProxyConfigurationError) in try ListenAddress(parsing: address) },
            allowedUIDs: Set(try options.allowedUsers.map(Self.uid)),
            socketGroup: try options.group.map(Self.gid),
            allowsRemoteCallers: options.allowsRemoteCallers,
            caBundle: try options.caFile.map(Self.readCAs),
            minimumValidity: options.minimumValidity,
            maximumConnections: max(1, min(options.maximumConnections, 4096)),
            idleSeconds: max(1, options.idleSeconds),
            headerSeconds: max(1, options.headerSeconds)
        )
    }

    /// `--allow-uid`'s user: the passwd entry of that name, else a uid.
    static func uid(_ user: String) throws(ProxyConfigurationError) -> UInt32 {
        if let entry = getpwnam(user) { return entry.pointee.pw_uid }
        if let number = UInt32(user), number != UInt32.max { return number }
        throw ProxyConfigurationError("--allow-uid \(user): no such user")
    }

    /// `--group`'s group: the group entry of that name, else a gid.
    static func gid(_ group: String) throws(ProxyConfigurationError) -> UInt32 {
        if let entry = getgrnam(group) { return entry.pointee.gr_gid }
        if let number = UInt32(group), number != UInt32.max { return number }
        throw ProxyConfigurationError("--group \(group): no such group")
    }

    /// `--ca-file`'s bytes: at most 4 MiB, holding at least one PEM certificate.
    static func readCAs(_ path: String) throws(ProxyConfigurationError) -> [UInt8] {
        guard let file = fopen(path, "r") else { throw ProxyConfigurationError("--ca-file \(path): \(String(cString: strerror(errno)))") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk.prefix(count)
            guard bytes.count <= caFileLimit else { throw ProxyConfigurationError("--ca-file \(path) is larger than 4 MiB") }
        }
        guard String(decoding: bytes, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            throw ProxyConfigurationError("--ca-file \(path) holds no PEM certificate")
        }
        return bytes
    }
}
