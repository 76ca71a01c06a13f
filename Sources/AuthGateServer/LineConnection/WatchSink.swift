import Logging
import NIOCore
import Synchronization

/// Tells the connection's ``ConnectionDeadlines`` that it now carries a watch, which is quiet
/// by nature: it is never closed for being idle.
struct WatchStarted: Sendable {}

/// Where a connection's `token.watch` notifications go: lines written on the connection's
/// event loop, between its answers.
///
/// A watch's notifications start after its answer: those that come while the answer is on its
/// way (the token it answers may itself be a refresh's, which is also a change) are held, then
/// written after it, without the one that only repeats the answered token. A client that stops
/// reading is dropped, not buffered for: once NIO's outbound buffer is over its high-water mark
/// (64 KiB), the connection is closed.
package final class WatchSink: Sendable {
    private struct State {
        /// No watch answered yet: notifications wait (at most ``maximumHeld``, the newest kept).
        var active = false
        var held: [(accessToken: String?, line: [UInt8])] = []
        /// Set by ``willAnswer(with:)``; the answer's write activates the sink.
        var answeredToken: String?
        /// What runs when the connection closes (``onClose(_:)``), by handle; `nil` once it has.
        var closeActions: [Int: @Sendable () -> Void]? = [:]
        var nextCloseAction = 0
        var watchesClose = false
    }

    private static let maximumHeld = 16
    private let channel: any Channel
    private let logger: Logger
    private let uid: UInt32
    private let state = Mutex(State())

    init(channel: any Channel, uid: UInt32, logger: Logger) {
        self.channel = channel
        self.uid = uid
        self.logger = logger
    }

    /// The connection now carries a watch (see ``WatchStarted``).
    package func started() {
        channel.eventLoop.execute { [channel] in channel.triggerUserOutboundEvent(WatchStarted(), promise: nil) }
    }

    /// The watch's answer, about to be written, holds `accessToken`.
    package func willAnswer(with accessToken: String) {
        state.withLock { $0.answeredToken = accessToken }
    }

    /// An answer was written on the connection (called on its event loop after every one): the
    /// first after ``willAnswer(with:)`` lets the held notifications go.
    func answerWritten() {
        let released = state.withLock { state -> [[UInt8]]? in
            guard !state.active, let answered = state.answeredToken else { return nil }
            state.active = true
            // Notifications up to the one carrying the answered token are older news.
            let fresh = state.held.lastIndex { $0.accessToken == answered }.map { state.held[($0 + 1)...] } ?? state.held[...]
            state.held = []
            return fresh.map(\.line)
        }
        for line in released ?? [] { write(line) }
    }

    /// Writes one notification line (with its newline), or holds it until the watch's answer.
    /// - Parameter accessToken: The token a `token.changed` carries, to leave out a repeat of the answer.
    package func send(_ line: [UInt8], accessToken: String?) {
        channel.eventLoop.execute {
            let held = self.state.withLock { state -> Bool in
                guard !state.active else { return false }
                state.held.append((accessToken, line))
                if state.held.count > Self.maximumHeld { state.held.removeFirst() }
                return true
            }
            if !held { self.write(line) }
        }
    }

    /// Writes a last notification, then closes the connection: the watch it carried ended for
    /// good. Notifications still held for a watch not yet answered are dropped with it.
    package func sendLast(_ line: [UInt8]) {
        channel.eventLoop.execute { [channel] in
            self.state.withLock { $0.held = [] }
            guard channel.isActive else { return }
            channel.writeAndFlush(ByteBuffer(bytes: line)).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func write(_ line: [UInt8]) {
        guard channel.isActive else { return }
        guard channel.isWritable else {
            logger.notice("closing a watching connection that does not read its notifications", metadata: ["peer.uid": "\(uid)"])
            channel.close(promise: nil)
            return
        }
        channel.writeAndFlush(ByteBuffer(bytes: line), promise: nil)
    }

    /// Calls `body` once the connection has closed (at once if it has), unless
    /// ``cancelOnClose(_:)`` takes it back first: a refused watch leaves nothing behind on a
    /// connection that goes on (one callback on the connection's close for all of them, and
    /// those taken back forgotten — a connection asking for watches that fail, again and again,
    /// grew the close's callbacks without bound).
    /// - Returns: The handle ``cancelOnClose(_:)`` takes.
    @discardableResult
    package func onClose(_ body: @escaping @Sendable () -> Void) -> Int {
        let (handle, registers) = state.withLock { state -> (Int?, Bool) in
            guard state.closeActions != nil else { return (nil, false) }
            let handle = state.nextCloseAction
            state.nextCloseAction += 1
            state.closeActions![handle] = body
            defer { state.watchesClose = true }
            return (handle, !state.watchesClose)
        }
        guard let handle else {
            body()  // closed already
            return -1
        }
        if registers {
            channel.closeFuture.whenComplete { _ in
                let actions = self.state.withLock { state in
                    defer { state.closeActions = nil }
                    return state.closeActions ?? [:]
                }
                for (_, action) in actions.sorted(by: { $0.key < $1.key }) { action() }
            }
        }
        return handle
    }

    /// Takes back what ``onClose(_:)`` would have run.
    package func cancelOnClose(_ handle: Int) {
        state.withLock { _ = $0.closeActions?.removeValue(forKey: handle) }
    }

    /// What waits for the connection's close (for the tests).
    var closeActionsWaiting: Int { state.withLock { $0.closeActions?.count ?? 0 } }
}
