package import NIOCore
import Synchronization

/// The connections of an async NIO server wrapped for its serving loop and not yet taken by it.
///
/// NIO traps when a `NIOAsyncChannel` is dropped without `executeThenClose`, and a connection
/// accepted just as the listener closes can miss the serving loop (swift-nio#2637): a SIGTERM
/// racing a new client crashed the daemon. Wrapping and stopping share one lock, so every
/// connection is either taken by the loop, closed by ``drain()``, or never wrapped at all.
/// Used by the daemon's two small HTTP listeners, the browser sign-in's redirect and the
/// metrics endpoint, whose accept loop is ``serveAll(from:admit:serve:)``. (The RPC socket
/// has no serving loop to miss: its connections are served in their pipelines, see
/// RPCConnectionHandler.)
package final class AcceptedConnections<Inbound: Sendable, Outbound: Sendable>: Sendable {
    package typealias Connection = NIOAsyncChannel<Inbound, Outbound>

    private struct State {
        var isOpen = true
        var waiting: [ObjectIdentifier: Connection] = [:]
    }

    private let state = Mutex(State())

    package init() {}

    /// Wraps `channel` for the serving loop.
    /// - Throws: `ChannelError.ioOnClosedChannel` once the server stopped (NIO closes it).
    package func wrap(_ channel: any Channel) throws -> Connection {
        try state.withLock { state in
            guard state.isOpen else { throw ChannelError.ioOnClosedChannel }
            let connection = try Connection(wrappingChannelSynchronously: channel)
            state.waiting[ObjectIdentifier(channel)] = connection
            return connection
        }
    }

    /// The serving loop has it.
    package func take(_ connection: Connection) {
        _ = state.withLock { $0.waiting.removeValue(forKey: ObjectIdentifier(connection.channel)) }
    }

    /// No more wrapping; the connections the loop never took are closed. Call it once the
    /// serving loop has ended, however it ended.
    package func drain() async {
        let left = state.withLock { state in
            state.isOpen = false
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for connection in left {
            try? await connection.executeThenClose { _, _ in }
        }
    }

    /// The accept loop: every connection `server` accepts is taken, then served in a task of
    /// its own if `admit` lets it in, or closed at once. Returns when the listener closes,
    /// after cancelling the connections still served and closing those accepted too late to
    /// be taken (``drain()``).
    /// - Parameters:
    ///   - admit: Whether to serve a connection: what to do when it ends (give its place
    ///     back), or `nil` to close it at once.
    ///   - serve: Serves one connection.
    package func serveAll(
        from server: NIOAsyncChannel<Connection, Never>,
        admit: (Connection) -> (@Sendable () -> Void)?,
        serve: @escaping @Sendable (Connection) async -> Void
    ) async {
        do {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await connection in inbound {
                        take(connection)
                        guard let ended = admit(connection) else {
                            // Closed through the async channel, which must be consumed.
                            group.addTask { try? await connection.executeThenClose { _, _ in } }
                            continue
                        }
                        group.addTask {
                            defer { ended() }
                            await serve(connection)
                        }
                    }
                }
                // The listener is closed: drop connections still open.
                group.cancelAll()
            }
        } catch {
            // The listener closed under us: nothing more to serve.
        }
        await drain()
    }
}
