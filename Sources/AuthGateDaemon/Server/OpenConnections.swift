import NIOCore
import Synchronization

/// The connections the RPC server serves, and the requests running for them.
///
/// Each request that needs the dispatcher runs as a task owned here, on its connection's event
/// loop (``EventLoopTaskExecutor``). When the server stops, ``stop()`` closes every connection,
/// cancels every request and waits until all of them have ended, so nothing a client asked
/// for outlives the server; connections accepted after that are closed at once.
final class OpenConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var requests: [UInt64: Task<Void, Never>] = [:]
        var nextRequest: UInt64 = 0
        var stopped = false
    }

    private let state = Mutex(State())

    /// Serves `channel` until it closes; closes it at once when the server has stopped.
    func add(_ channel: any Channel) {
        let added = state.withLock { state in
            guard !state.stopped else { return false }
            state.channels[ObjectIdentifier(channel)] = channel
            return true
        }
        guard added else { return channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in
            _ = self.state.withLock { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
        }
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
            return (Array(state.channels.values), Array(state.requests.values))
        }
        for channel in channels { channel.close(promise: nil) }
        for request in requests { request.cancel() }
        for request in requests { await request.value }
    }
}
