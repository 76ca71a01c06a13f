import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One accepted connection: its descriptor, who is at the other end, and its place in the
/// limits (``OpenConnections``) when it was admitted. The one value that gives the descriptor
/// and the place back, each exactly once, wherever the connection ends:
///
/// ```
///  accepted ──▶ open ──close()──────────────────────────▶ closed   (descriptor closed, place back)
///                │
///                └─adopt(channel)─▶ adopted ──channel closes──▶ closed   (NIO closed it; place back)
/// ```
///
/// The front door holds it while it serves the connection (``ConnectionTable``); a connection
/// it hands on is adopted by a NIO channel (``RPCServer``), which then owns the descriptor. A
/// hand-on that fails before the channel adopted it is closed here; after, the channel's own
/// close gives the place back.
final class ClientConnection: Sendable {
    let descriptor: Int32
    let caller: PeerCredentials
    let admission: OpenConnections.Admission
    private let connections: OpenConnections
    private let state = Atomic<UInt8>(State.open)

    private enum State {
        static let open: UInt8 = 0
        static let adopted: UInt8 = 1
        static let closed: UInt8 = 2
    }

    /// - Parameter admission: What ``OpenConnections/reserve(uid:limit:share:)`` decided; an
    ///   admitted connection holds a place until it ends.
    init(descriptor: Int32, caller: PeerCredentials, admission: OpenConnections.Admission, connections: OpenConnections) {
        self.descriptor = descriptor
        self.caller = caller
        self.admission = admission
        self.connections = connections
    }

    /// Closes the descriptor and gives the place back, unless a channel adopted the connection
    /// (its close does both) or it is closed already.
    func close() {
        guard state.compareExchange(expected: State.open, desired: State.closed, ordering: .acquiringAndReleasing).exchanged else { return }
        _ = Glibc.close(descriptor)
        releasePlace()
    }

    /// A channel owns the descriptor from now; ``channelClosed()`` gives the place back.
    /// - Returns: `false` when the connection was closed already.
    func adopt() -> Bool {
        state.compareExchange(expected: State.open, desired: State.adopted, ordering: .acquiringAndReleasing).exchanged
    }

    /// The adopting channel closed: gives the place back.
    func channelClosed() {
        guard state.compareExchange(expected: State.adopted, desired: State.closed, ordering: .acquiringAndReleasing).exchanged else { return }
        releasePlace()
    }

    /// Whether the descriptor and the place were given back.
    var isClosed: Bool { state.load(ordering: .acquiring) == State.closed }

    private func releasePlace() {
        if admission == .admitted { connections.release(uid: caller.uid) }
    }
}
