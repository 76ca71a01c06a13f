import CLinux
import NIOCore
import NIOPosix
import Synchronization

/// The connections the RPC server serves (counted against `ConnectionLimits.maximumConnections`),
/// and the requests running for them.
///
/// Each request that needs the dispatcher runs as a task owned here, on its connection's event
/// loop (``EventLoopTaskExecutor``). When the server stops, ``stop()`` closes every connection,
/// cancels every request and waits until all of them have ended, so nothing a client asked
/// for outlives the server; connections accepted after that are closed at once.
package final class OpenConnections: Sendable {
    /// Whether a new connection is served, and if not, which bound it met.
    package enum Admission: Equatable, Sendable {
        case admitted
        /// `maximumConnections` are open.
        case tooManyInAll
        /// Its uid holds its share of them already.
        case tooManyOfOneUser
    }

    fileprivate struct State {
        /// The connections NIO serves (those the front door handed on).
        var channels: [ObjectIdentifier: any Channel] = [:]
        /// The connections within the limit, wherever they are served (``FrontDoor`` or NIO).
        var admitted = 0
        /// Admitted connections by uid.
        var byUID: [UInt32: Int] = [:]
        var requests: [UInt64: Task<Void, Never>] = [:]
        /// Requests under way by uid: a request outlives its connection (it may wait on a slow
        /// provider), so a uid's connection share alone does not bound them.
        var requestsByUID: [UInt32: Int] = [:]
        var nextRequest: UInt64 = 0
        var stopped = false
        /// The most connections admitted at once since the heap was last trimmed.
        var peakSinceTrim = 0
        /// The trim planned for when the connections are gone (``trimDelay``).
        var trim: Scheduled<Void>?
    }

    /// How many connections at once make a burst whose memory is given back once they are
    /// gone: a client or two never pays for a trim.
    static let burst = 16
    /// How long after the last connection of a burst closed the heap is trimmed: the
    /// connections' buffers are freed when NIO lets go of their channels, a moment after they
    /// give their places back; a burst starting meanwhile is trimmed after it instead.
    static let trimDelay: TimeAmount = .seconds(1)

    private let state = Mutex(State())

    package init() {}

    /// Decides on a new connection of `uid`: whether it is within `limit` open connections
    /// and, unless `share` is nil, within `share` of them for `uid`. An admitted connection
    /// holds its place until ``release(uid:)`` (``ClientConnection`` calls it, once). Nothing is
    /// admitted once the server has stopped (`nil`).
    func reserve(uid: UInt32, limit: Int, share: Int?) -> Admission? {
        state.withLock { state -> Admission? in
            guard !state.stopped else { return nil }
            let admission: Admission =
                if state.admitted >= limit {
                    .tooManyInAll
                } else if let share, state.byUID[uid, default: 0] >= share {
                    .tooManyOfOneUser
                } else {
                    .admitted
                }
            if admission == .admitted {
                state.admitted += 1
                state.byUID[uid, default: 0] += 1
                state.peakSinceTrim = max(state.peakSinceTrim, state.admitted)
                state.trim?.cancel()
                state.trim = nil
            }
            return admission
        }
    }

    /// Gives back the place of an admitted connection (closed, wherever it was served). The
    /// last connection of a burst plans a trim of the heap (``trimDelay``): 200 connections
    /// pipelining lines they never read grow the daemon by tens of MiB, which glibc would keep
    /// for good once they are gone (`authgate-bench --only burst` measures it).
    func release(uid: UInt32) {
        state.withLock { state in
            state.release(uid: uid)
            guard state.admitted == 0, state.peakSinceTrim >= Self.burst, state.trim == nil, !state.stopped else { return }
            state.trim = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: Self.trimDelay) {
                self.trimmed()
            }
        }
    }

    private func trimmed() {
        let due = state.withLock { state -> Bool in
            guard state.trim != nil, state.admitted == 0 else { return false }
            state.trim = nil
            state.peakSinceTrim = 0
            return true
        }
        if due { _ = ag_release_free_memory() }
    }

    /// Keeps `channel`, which adopts `connection` (``ClientConnection/adopt()``), until it
    /// closes; the connection's place, if it has one, is given back then. When the server has
    /// stopped, or the connection was closed already, the channel is closed at once.
    func adopt(_ channel: any Channel, _ connection: ClientConnection) {
        guard connection.adopt() else {
            channel.close(promise: nil)
            return
        }
        let added = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.channels[ObjectIdentifier(channel)] = channel
            return true
        }
        channel.closeFuture.whenComplete { _ in
            self.state.withLock { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
            connection.channelClosed()
        }
        if !added { channel.close(promise: nil) }
    }

    /// The connections being served (within the limit); for the metrics.
    package var count: Int { state.withLock { $0.admitted } }

    /// Runs `request` of `uid` on `eventLoop`; nothing runs once the server has stopped.
    /// - Parameter share: How many requests `uid` may have under way at once, on all its
    ///   connections, open or closed since; `nil` for no bound (root, the daemon's own user).
    /// - Returns: `false` when `uid` has its share under way already: nothing was run.
    func run(on eventLoop: any EventLoop, uid: UInt32, share: Int?, _ request: @escaping @Sendable () async -> Void) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return true }
            if let share {
                guard state.requestsByUID[uid, default: 0] < share else { return false }
                state.requestsByUID[uid, default: 0] += 1
            }
            let id = state.nextRequest
            state.nextRequest += 1
            let counted = share != nil
            // The task cannot remove itself before it is stored: it needs this lock.
            state.requests[id] = Task(executorPreference: EventLoopTaskExecutor(eventLoop)) {
                await request()
                self.state.withLock { state in
                    state.requests.removeValue(forKey: id)
                    guard counted else { return }
                    let left = state.requestsByUID[uid, default: 1] - 1
                    state.requestsByUID[uid] = left > 0 ? left : nil
                }
            }
            return true
        }
    }

    /// Closes every connection, cancels every request, and returns when all requests have ended.
    func stop() async {
        let (channels, requests) = state.withLock { state in
            state.stopped = true
            state.trim?.cancel()
            state.trim = nil
            return (Array(state.channels.values), Array(state.requests.values))
        }
        for channel in channels { channel.close(promise: nil) }
        for request in requests { request.cancel() }
        for request in requests { await request.value }
    }
}

extension OpenConnections.State {
    fileprivate mutating func release(uid: UInt32) {
        admitted -= 1
        byUID[uid, default: 1] -= 1
        if byUID[uid] == 0 { byUID[uid] = nil }
    }
}
