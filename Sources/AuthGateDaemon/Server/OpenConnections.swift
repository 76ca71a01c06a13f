import NIOCore
import Synchronization

/// The connections the RPC server serves (counted against `ConnectionLimits.maximumConnections`),
/// and the requests running for them.
///
/// Each request that needs the dispatcher runs as a task owned here, on its connection's event
/// loop (``EventLoopTaskExecutor``). When the server stops, ``stop()`` closes every connection,
/// cancels every request and waits until all of them have ended, so nothing a client asked
/// for outlives the server; connections accepted after that are closed at once.
final class OpenConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: (channel: any Channel, admitted: Bool)] = [:]
        /// The channels within the limit, of those above.
        var admitted = 0
        var requests: [UInt64: Task<Void, Never>] = [:]
        var nextRequest: UInt64 = 0
        var stopped = false
    }

    private let state = Mutex(State())

    /// Keeps `channel` until it closes, and tells whether it is within `limit` open connections
    /// (one over it is kept too, until it has been told so and closed). When the server has
    /// stopped the channel is closed at once: nothing to refuse.
    func add(_ channel: any Channel, limit: Int) -> Bool {
        let (added, admitted) = state.withLock { state in
            guard !state.stopped else { return (false, true) }
            let admitted = state.admitted < limit
            if admitted { state.admitted += 1 }
            state.channels[ObjectIdentifier(channel)] = (channel, admitted)
            return (true, admitted)
        }
        guard added else {
            channel.close(promise: nil)
            return admitted
        }
        channel.closeFuture.whenComplete { _ in
            self.state.withLock { state in
                if state.channels.removeValue(forKey: ObjectIdentifier(channel))?.admitted == true { state.admitted -= 1 }
            }
        }
        return admitted
    }

    /// Runs `request` on `eventLoop`; nothing runs once the server has stopped.
    func run(on eventLoop: any EventLoop, _ request: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            guard !state.stopped else { return }
            let id = state.nextRequest
            state.nextRequest += 1
            // The task cannot remove itself before it is stored: it needs this lock.
            state.requests[id] = Task(executorPreference: EventLoopTaskExecutor(eventLoop)) {
                await request()
                _ = self.state.withLock { $0.requests.removeValue(forKey: id) }
            }
        }
    }

    /// Closes every connection, cancels every request, and returns when all requests have ended.
    func stop() async {
        let (channels, requests) = state.withLock { state in
            state.stopped = true
            return (state.channels.values.map(\.channel), Array(state.requests.values))
        }
        for channel in channels { channel.close(promise: nil) }
        for request in requests { request.cancel() }
        for request in requests { await request.value }
    }
}
