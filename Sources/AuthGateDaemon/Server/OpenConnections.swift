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
    /// Whether a new connection is served, and if not, which bound it met.
    enum Admission: Equatable, Sendable {
        case admitted
        /// `maximumConnections` are open.
        case tooManyInAll
        /// Its uid holds its share of them already.
        case tooManyOfOneUser
    }

    private struct State {
        var channels: [ObjectIdentifier: (channel: any Channel, uid: UInt32, admitted: Bool)] = [:]
        /// The channels within the limit, of those above.
        var admitted = 0
        /// Admitted channels by uid.
        var byUID: [UInt32: Int] = [:]
        var requests: [UInt64: Task<Void, Never>] = [:]
        var nextRequest: UInt64 = 0
        var stopped = false
    }

    private let state = Mutex(State())

    /// Keeps `channel` until it closes, and tells whether it is within `limit` open connections
    /// and, unless `share` is nil, within `share` of them for `uid` (one over is kept too, until
    /// it has been told so and closed). When the server has stopped the channel is closed at
    /// once: nothing to refuse.
    func add(_ channel: any Channel, uid: UInt32, limit: Int, share: Int?) -> Admission {
        let (added, admission) = state.withLock { state -> (Bool, Admission) in
            guard !state.stopped else { return (false, .admitted) }
            let admission: Admission = if state.admitted >= limit {
                .tooManyInAll
            } else if let share, state.byUID[uid, default: 0] >= share {
                .tooManyOfOneUser
            } else {
                .admitted
            }
            let admitted = admission == .admitted
            if admitted {
                state.admitted += 1
                state.byUID[uid, default: 0] += 1
            }
            state.channels[ObjectIdentifier(channel)] = (channel, uid, admitted)
            return (true, admission)
        }
        guard added else {
            channel.close(promise: nil)
            return admission
        }
        channel.closeFuture.whenComplete { _ in
            self.state.withLock { state in
                guard let removed = state.channels.removeValue(forKey: ObjectIdentifier(channel)), removed.admitted else { return }
                state.admitted -= 1
                state.byUID[removed.uid, default: 1] -= 1
                if state.byUID[removed.uid] == 0 { state.byUID[removed.uid] = nil }
            }
        }
        return admission
    }

    /// The connections being served (within the limit); for the metrics.
    var count: Int { state.withLock { $0.admitted } }

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
