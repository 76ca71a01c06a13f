import FoundationEssentials

/// Bounds on what one client may cost the daemon.
public struct ConnectionLimits: Sendable {
    /// Connections served at once; one more gets a `rate_limited` error line and is closed.
    public var maximumConnections: Int
    /// A request line must be complete this long after its first byte arrived.
    public var requestTimeout: Duration
    /// A connection with nothing to answer and nothing arriving is closed after this long.
    public var idleTimeout: Duration
    /// A connection that sends no byte this long after it was accepted is closed: holding
    /// sockets open without asking anything costs others their places.
    public var firstByteTimeout: Duration

    /// The connections one uid may hold at once: a quarter of ``maximumConnections``, so that
    /// one user cannot lock the others out. Root and the daemon's own uid are not bound by it,
    /// unless ``exemptsAdministrators`` is false.
    public var perUserShare: Int { max(1, maximumConnections / 4) }
    /// Whether root and the daemon's own uid are exempt from the per-user shares (connections,
    /// sessions, provider requests): they administer the daemon. `authgated --no-admin` turns it
    /// off: where nobody administers the daemon through its socket, a caller running as uid 0
    /// (a container's) is one user among others.
    public var exemptsAdministrators = true

    public init(
        maximumConnections: Int = 1024,
        requestTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(300),
        firstByteTimeout: Duration = .seconds(2)
    ) {
        self.maximumConnections = maximumConnections
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.firstByteTimeout = firstByteTimeout
    }
}

/// A deadline a connection is closed by, and what the log says of it: one policy for both
/// servers, the front door's (``ConnectionTable``) and NIO's (``ConnectionDeadlines``).
enum ConnectionDeadline: Sendable, Equatable {
    /// No byte within `firstByteTimeout` of the accept.
    case firstByte
    /// A request line not finished within `requestTimeout` of its first byte.
    case request
    /// Nothing in progress and nothing arriving for `idleTimeout`.
    case idle
    /// Answers waiting for the client to read them (the connection unwritable: NIO holds its
    /// high-water mark) for `idleTimeout`: lines waiting behind them keep such a connection from
    /// ever counting as idle.
    case unread

    /// What a connection with no partial line and no request in progress waits for.
    static func quiet(bytesArrived: Bool) -> ConnectionDeadline { bytesArrived ? .idle : .firstByte }

    func duration(_ limits: ConnectionLimits) -> Duration {
        switch self {
        case .firstByte: limits.firstByteTimeout
        case .request: limits.requestTimeout
        case .idle, .unread: limits.idleTimeout
        }
    }

    /// What the log says of a connection it closed.
    func reason(_ limits: ConnectionLimits) -> String {
        switch self {
        case .firstByte: "nothing arrived within \(limits.firstByteTimeout) of connecting"
        case .request: "the request line was not finished in time"
        case .idle: "the connection was idle"
        case .unread: "its answers were not read for \(limits.idleTimeout)"
        }
    }
}
