// The params and results of `daemon.info`, `metrics` and `storage.rekey` (docs/RPC.md), with their wire names.

/// `daemon.info` result.
public struct DaemonInfo: Sendable, Codable {
    public var version: String
    public var uptimeSeconds: Int
    /// Providers the caller can see.
    public var providers: Int
    /// The caller's sessions.
    public var sessions: Int
    public var configDir: String
    /// `system` or `user`.
    public var mode: String
    public var socket: String
    /// The user and group the daemon runs as: where files it must read are written for it
    /// (`provider add --register` as root for a daemon running as `authgate`).
    public var daemonUID: UInt32?
    public var daemonGID: UInt32?
    /// `token` calls answered on an event loop from a session's published answer since the
    /// daemon started, for every caller; shown to administrators only.
    public var cachedTokenAnswers: Int?
    /// The background refresh, every user's; shown to administrators only.
    public var refresh: RefreshStatistics?
    /// The HTTP metrics listener, when there is one; shown to administrators only.
    public var metricsListener: MetricsListenerInfo?
    /// Where the storage key lives (`credential`, `secret-service` or `file`); absent until
    /// the session store is opened (a daemon with `memory` providers only never opens it).
    public var storageKey: String?

    public init(
        version: String,
        uptimeSeconds: Int,
        providers: Int,
        sessions: Int,
        configDir: String,
        mode: String,
        socket: String,
        daemonUID: UInt32? = nil,
        daemonGID: UInt32? = nil,
        cachedTokenAnswers: Int? = nil,
        refresh: RefreshStatistics? = nil,
        metricsListener: MetricsListenerInfo? = nil,
        storageKey: String? = nil
    ) {
        self.metricsListener = metricsListener
        self.storageKey = storageKey
        self.cachedTokenAnswers = cachedTokenAnswers
        self.refresh = refresh
        self.version = version
        self.uptimeSeconds = uptimeSeconds
        self.providers = providers
        self.sessions = sessions
        self.configDir = configDir
        self.mode = mode
        self.socket = socket
        self.daemonUID = daemonUID
        self.daemonGID = daemonGID
    }

    private enum CodingKeys: String, CodingKey {
        case version, providers, sessions, mode, socket
        case uptimeSeconds = "uptime_seconds"
        case configDir = "config_dir"
        case daemonUID = "daemon_uid"
        case daemonGID = "daemon_gid"
        case cachedTokenAnswers = "cached_token_answers"
        case refresh
        case metricsListener = "metrics_listener"
        case storageKey = "storage_key"
    }
}

/// The HTTP metrics listener as `daemon.info` shows it to administrators.
public struct MetricsListenerInfo: Sendable, Codable, Equatable {
    /// `HOST:PORT`, or the socket systemd passed.
    public var address: String
    /// False while its address cannot be bound (it tries again in the background).
    public var serving: Bool
    /// Why it does not serve.
    public var error: String?

    public init(address: String, serving: Bool, error: String?) {
        self.address = address
        self.serving = serving
        self.error = error
    }
}

/// The background refresh as `daemon.info` shows it to administrators.
public struct RefreshStatistics: Sendable, Codable, Equatable {
    /// Refreshes at providers right now (background and callers').
    public var inFlight: Int
    /// Sessions past their planned refresh time waiting for a slot, by provider.
    public var waiting: [String: Int]
    /// Background refreshes started since the daemon did.
    public var started: Int
    /// How late the last 10,000 background refreshes started against their plan, in seconds.
    public var latenessP50Seconds: Double?
    public var latenessP99Seconds: Double?
    public var latenessMaxSeconds: Double?

    public init(
        inFlight: Int,
        waiting: [String: Int],
        started: Int,
        latenessP50Seconds: Double?,
        latenessP99Seconds: Double?,
        latenessMaxSeconds: Double?
    ) {
        self.inFlight = inFlight
        self.waiting = waiting
        self.started = started
        self.latenessP50Seconds = latenessP50Seconds
        self.latenessP99Seconds = latenessP99Seconds
        self.latenessMaxSeconds = latenessMaxSeconds
    }

    private enum CodingKeys: String, CodingKey {
        case waiting, started
        case inFlight = "in_flight"
        case latenessP50Seconds = "lateness_p50_seconds"
        case latenessP99Seconds = "lateness_p99_seconds"
        case latenessMaxSeconds = "lateness_max_seconds"
    }
}

/// `metrics` result: the daemon's metrics in Prometheus's text exposition format.
public struct MetricsResult: Sendable, Codable {
    /// `text/plain; version=0.0.4; charset=utf-8`.
    public var contentType: String
    public var text: String

    public init(contentType: String, text: String) {
        self.contentType = contentType
        self.text = text
    }

    private enum CodingKeys: String, CodingKey {
        case contentType = "content_type"
        case text
    }
}

/// `storage.rekey` result: what was sealed again, and where the new key lives.
public struct StorageRekeyResult: Sendable, Codable, Equatable {
    /// `secret-service` or `file`.
    public var storageKey: String
    /// Sessions files (one per uid) now sealed with the new key.
    public var files: Int
    /// The sessions in them.
    public var sessions: Int
    /// Files no key opened, left as they were (the next start moves them aside).
    public var unreadableFiles: Int

    public init(storageKey: String, files: Int, sessions: Int, unreadableFiles: Int) {
        self.storageKey = storageKey
        self.files = files
        self.sessions = sessions
        self.unreadableFiles = unreadableFiles
    }

    private enum CodingKeys: String, CodingKey {
        case files, sessions
        case storageKey = "storage_key"
        case unreadableFiles = "unreadable_files"
    }
}
