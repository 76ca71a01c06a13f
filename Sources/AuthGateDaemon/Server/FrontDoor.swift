import AuthGateCore
import CLinux
import Logging
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Accepts every connection to the daemon's socket, on one thread with its own epoll, and
/// answers plain `token` calls for a current token right there; every other connection is
/// handed on to NIO, with what was read from it, to be served by ``RPCConnectionHandler``.
///
/// Most callers are short-lived processes (`authgate token`, the credential helpers) that
/// open a connection, ask for a token and close it. Through NIO alone such a connection cost
/// ~115 µs of daemon CPU and 3 context switches: a channel and its pipeline of five handlers,
/// promises for `SO_PEERCRED` and the close, timers scheduled and cancelled, and the hand-off
/// from the accepting event loop to another (measured with `perf`, docs/BENCHMARKS.md). Here
/// it costs what the kernel's `accept4`, `read`, `write` and `close` cost, plus a look at the
/// line (``RecentTokenAnswers``, ``CachedTokenAnswers``), much as in a trivial C server. Measured
/// with the C load generator of `scripts/bench`, a connection per request from 32 clients went
/// from 25.0k to 73.9k req/s (0.34 → 0.91 of the C floor in the same run), from 1 client from
/// 6.8k to 17.6k (0.37 → 0.88).
///
/// What stays here and what is handed on:
/// - A connection stays while every read brings exactly one complete line that
///   ``CachedTokenAnswers`` answers. Anything else — another method, a token to refresh, two
///   lines in one read, a partial line, an answer the socket cannot take at once — hands it
///   on, with the bytes read and the answer bytes not yet written, so NIO serves it exactly
///   as if it had read them itself.
/// - A connection over the limits (``OpenConnections``) is handed on at once, to be told
///   `rate_limited` and closed.
/// - Its deadlines are those of ``ConnectionDeadlines``: closed when no byte arrives within
///   `firstByteTimeout`, or nothing within `idleTimeout` of the last request. A connection
///   here never has a partial line (that is handed on), so the request timeout is NIO's.
///
/// The thread sleeps in `epoll_wait` until a connection, a request or the next deadline;
/// ``stop()`` wakes it through an eventfd, and it closes the listener and its connections.
final class FrontDoor: Sendable {
    /// A connection handed on to NIO.
    struct HandOff: Sendable {
        var descriptor: Int32
        var caller: PeerCredentials
        var admission: OpenConnections.Admission
        /// Read from the connection and not answered: NIO serves these bytes first.
        var unread: [UInt8]
        /// The end of an answer the socket did not take: NIO writes it before anything else.
        var unwritten: [UInt8]
        /// Whether a byte arrived already (the first-byte deadline is over).
        var bytesArrived: Bool
    }

    private let listener: Int32
    private let wake: Int32
    private let limits: ConnectionLimits
    private let connections: OpenConnections
    private let answers: CachedTokenAnswers
    private let logger: Logger
    /// Where connections closed by a deadline are logged, batched.
    private let timeouts: BatchedNotices
    private let handOff: @Sendable (HandOff) -> Void
    private let stopping = Atomic<Bool>(false)
    private let ending = Mutex<Ending>(.running(nil))

    private enum Ending {
        case running(CheckedContinuation<Void, Never>?)
        case ended
    }

    /// - Parameters:
    ///   - listener: A listening Unix stream socket; the front door makes it non-blocking and closes it when it stops.
    ///   - handOff: Serves a connection with NIO; called on the front door's thread.
    init(listener: Int32, limits: ConnectionLimits, connections: OpenConnections, answers: CachedTokenAnswers, logger: Logger,
         timeouts: BatchedNotices, handOff: @escaping @Sendable (HandOff) -> Void) throws {
        let wake = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wake >= 0 else { throw SocketSetupError(description: "cannot create an eventfd: \(String(cString: strerror(errno)))") }
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        self.listener = listener
        self.wake = wake
        self.limits = limits
        self.connections = connections
        self.answers = answers
        self.logger = logger
        self.timeouts = timeouts
        self.handOff = handOff
    }

    /// Serves the socket on a thread of its own and returns when ``stop()`` has ended it.
    func run() async {
        var thread = pthread_t()
        let door = Unmanaged.passRetained(self)
        let created = pthread_create(&thread, nil, { context in
            let door = Unmanaged<FrontDoor>.fromOpaque(context!).takeRetainedValue()
            door.serve()
            return nil
        }, door.toOpaque())
        guard created == 0 else {
            door.release()
            logger.critical("cannot start the socket's thread", metadata: ["error": "\(String(cString: strerror(created)))"])
            return
        }
        pthread_detach(thread)
        await withCheckedContinuation { continuation in
            let ended = ending.withLock { ending -> Bool in
                if case .ended = ending { return true }
                ending = .running(continuation)
                return false
            }
            if ended { continuation.resume() }
        }
    }

    /// Stops accepting and closes the connections still served here (not those handed on).
    func stop() {
        stopping.store(true, ordering: .releasing)
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    // MARK: The thread

    private func serve() {
        ag_set_thread_name("authgate-door")
        let loop = Loop(door: self)
        loop.run()
        loop.closeAll()
        close(listener)
        close(wake)
        let continuation = ending.withLock { ending -> CheckedContinuation<Void, Never>? in
            defer { ending = .ended }
            if case .running(let continuation) = ending { return continuation }
            return nil
        }
        continuation?.resume()
    }

    /// The state only the front door's thread touches.
    private final class Loop {
        struct Connection {
            var caller: PeerCredentials
            /// When it was accepted, then when its last request arrived (uptime nanoseconds).
            var since: UInt64
            var bytesArrived = false
        }

        static let listenerTag = UInt64.max
        static let wakeTag = UInt64.max - 1
        /// Larger than any plain `token` line; a read that fills it is handed on (NIO reads the rest).
        static let readCapacity = 16 * 1024

        let door: FrontDoor
        let epoll: Int32
        /// Indexed by descriptor.
        var connections: [Connection?] = []
        /// The earliest deadline of a connection here, or when to accept again; never later than it.
        var nextCheck = UInt64.max
        var acceptingPausedUntil: UInt64?
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readCapacity, alignment: 16)
        var recent = RecentTokenAnswers()
        /// Answers given in this batch of events, counted in the metrics when it ends: a batch
        /// holds a request from each client that sent one, and counting and timing per batch
        /// instead of per answer (one clock read and two atomic additions for all of them)
        /// took the metrics' cost on keep-alive `token` calls from 7.7–12.7 % to within
        /// ±1.8 % (`authgate-bench --only metrics`, docs/BENCHMARKS.md). Each answer is
        /// recorded with its batch's time, from `epoll_wait`'s return to the last answer: an
        /// upper bound of its own.
        var answeredInBatch = 0

        /// How much of an answer the socket took.
        enum Sent {
            case all
            /// The client is gone.
            case failed
            /// The rest, for NIO to write.
            case part([UInt8])
        }

        init(door: FrontDoor) {
            self.door = door
            epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
            _ = ag_epoll_add(epoll, door.listener, EPOLLIN.rawValue, Self.listenerTag)
            _ = ag_epoll_add(epoll, door.wake, EPOLLIN.rawValue, Self.wakeTag)
        }

        deinit {
            readBuffer.deallocate()
            close(epoll)
        }

        func run() {
            var tags = [UInt64](repeating: 0, count: 64)
            var events = [UInt32](repeating: 0, count: 64)
            var now = Self.uptime()
            while !door.stopping.load(ordering: .acquiring) {
                if now >= nextCheck { checkDeadlines(now) }
                let timeout = nextCheck == .max ? -1 : Int32(clamping: (nextCheck - min(now, nextCheck) + 999_999) / 1_000_000)
                let count = ag_epoll_wait(epoll, &tags, &events, 64, timeout)
                now = Self.uptime()
                for index in 0..<Int(max(0, count)) {
                    switch tags[index] {
                    case Self.listenerTag: acceptAll(now)
                    case Self.wakeTag: break  // stopping
                    default: read(Int32(truncatingIfNeeded: tags[index]), now)
                    }
                }
                if answeredInBatch > 0 {
                    door.answers.metrics?.cachedTokenAnswers(answeredInBatch, eachWithin: .nanoseconds(Self.uptime() - now))
                    answeredInBatch = 0
                }
            }
        }

        // MARK: Accepting

        private func acceptAll(_ now: UInt64) {
            while true {
                let descriptor = ag_accept(door.listener)
                guard descriptor >= 0 else {
                    switch errno {
                    case EAGAIN, EWOULDBLOCK: return
                    case EINTR, ECONNABORTED, EPROTO: continue
                    default:
                        // Out of descriptors or memory: wait a moment instead of spinning on
                        // a listener that stays readable.
                        door.logger.warning("cannot accept connections for now", metadata: ["error": "\(String(cString: strerror(errno)))"])
                        _ = ag_epoll_modify(epoll, door.listener, 0, Self.listenerTag)
                        acceptingPausedUntil = now + 100_000_000
                        nextCheck = min(nextCheck, now + 100_000_000)
                        return
                    }
                }
                accepted(descriptor, now)
            }
        }

        private func accepted(_ descriptor: Int32, _ now: UInt64) {
            // A connection accepted before a reload adds an executables rule has no pin, and
            // the rule refuses it (AccessPolicy): it fails closed until it reconnects.
            guard let caller = PeerCredentials(socket: descriptor, pinProcess: door.answers.providers.anyExecutableRule) else {
                close(descriptor)
                return
            }
            let uid = caller.uid
            // Root and the daemon's own user administer it; everyone else holds at most a share.
            let share = caller.isUnbounded ? nil : door.limits.perUserShare
            guard let admission = door.connections.reserve(uid: uid, limit: door.limits.maximumConnections, share: share) else {
                close(descriptor)  // the server has stopped
                return
            }
            guard admission == .admitted else {
                door.handOff(HandOff(descriptor: descriptor, caller: caller, admission: admission, unread: [], unwritten: [], bytesArrived: false))
                return
            }
            door.logger.debug("connection opened", metadata: ["peer.uid": "\(uid)", "peer.pid": "\(caller.pid)"])
            guard ag_epoll_add(epoll, descriptor, EPOLLIN.rawValue, UInt64(descriptor)) == 0 else {
                close(descriptor)
                door.connections.release(uid: uid)
                return
            }
            let index = Int(descriptor)
            if index >= connections.count { connections.append(contentsOf: repeatElement(nil, count: index + 1 - connections.count)) }
            connections[index] = Connection(caller: caller, since: now)
            nextCheck = min(nextCheck, now + Self.nanoseconds(door.limits.firstByteTimeout))
        }

        // MARK: Serving

        private func read(_ descriptor: Int32, _ now: UInt64) {
            let index = Int(descriptor)
            guard index < connections.count, let connection = connections[index] else { return }
            let count = Glibc.read(descriptor, readBuffer.baseAddress, readBuffer.count)
            if count < 0, errno == EAGAIN || errno == EINTR { return }
            guard count > 0 else { return closeConnection(descriptor) }  // the client closed (or reset) it
            connections[index]?.since = now
            connections[index]?.bytesArrived = true
            let bytes = UnsafeRawBufferPointer(rebasing: readBuffer[0..<count])
            if count < readBuffer.count, bytes[count - 1] == UInt8(ascii: "\n"), bytes.firstIndex(of: UInt8(ascii: "\n")) == count - 1 {
                var end = count - 1
                if end > 0, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                let line = UnsafeRawBufferPointer(rebasing: bytes[0..<end])
                let outcome = recent.withAnswer(to: line, uid: connection.caller.uid, from: door.answers) { answer -> Sent in
                    let sent = send(descriptor, answer.baseAddress, answer.count, Int32(MSG_NOSIGNAL))
                    if sent == answer.count { return .all }
                    guard sent >= 0 || errno == EAGAIN else { return .failed }
                    return .part(Array(answer[max(0, sent)...]))
                }
                if outcome != nil { answeredInBatch += 1 }
                switch outcome {
                case .all?: return
                case .failed?: return closeConnection(descriptor)
                case .part(let unwritten)?: return handOn(descriptor, connection, unread: [], unwritten: unwritten)
                case nil: break
                }
            }
            handOn(descriptor, connection, unread: Array(bytes), unwritten: [])
        }

        private func handOn(_ descriptor: Int32, _ connection: Connection, unread: [UInt8], unwritten: [UInt8]) {
            _ = epoll_ctl(epoll, EPOLL_CTL_DEL, descriptor, nil)
            connections[Int(descriptor)] = nil
            door.handOff(HandOff(descriptor: descriptor, caller: connection.caller, admission: .admitted, unread: unread, unwritten: unwritten,
                                 bytesArrived: true))
        }

        private func closeConnection(_ descriptor: Int32) {
            guard let connection = connections[Int(descriptor)] else { return }
            connections[Int(descriptor)] = nil
            close(descriptor)
            door.connections.release(uid: connection.caller.uid)
        }

        // MARK: Deadlines

        private func checkDeadlines(_ now: UInt64) {
            var next = UInt64.max
            if let pausedUntil = acceptingPausedUntil {
                if now >= pausedUntil {
                    acceptingPausedUntil = nil
                    _ = ag_epoll_modify(epoll, door.listener, EPOLLIN.rawValue, Self.listenerTag)
                } else {
                    next = pausedUntil
                }
            }
            let firstByte = Self.nanoseconds(door.limits.firstByteTimeout), idle = Self.nanoseconds(door.limits.idleTimeout)
            for index in connections.indices {
                guard let connection = connections[index] else { continue }
                let deadline = connection.since + (connection.bytesArrived ? idle : firstByte)
                if now >= deadline {
                    let reason = connection.bytesArrived ? ConnectionDeadlines.idleReason : ConnectionDeadlines.firstByteReason(door.limits)
                    door.timeouts.record(reason, message: "closing a connection: \(reason)", uid: connection.caller.uid,
                                         metadata: ["peer.pid": "\(connection.caller.pid)"])
                    closeConnection(Int32(index))
                } else {
                    next = min(next, deadline)
                }
            }
            nextCheck = next
        }

        /// Closes every connection still here (the server is stopping).
        func closeAll() {
            for index in connections.indices where connections[index] != nil {
                closeConnection(Int32(index))
            }
        }

        static func uptime() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

        static func nanoseconds(_ duration: Duration) -> UInt64 {
            let (seconds, attoseconds) = duration.components
            return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds)) / 1_000_000_000
        }
    }
}

/// The first handler of a connection ``FrontDoor`` handed on: when the channel becomes active,
/// before NIO reads anything from the socket, it writes the end of an answer the front door
/// could not write and passes on the bytes the front door read, then leaves the pipeline.
final class HandedOnBytes: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let unread: [UInt8]
    private let unwritten: [UInt8]

    init(unread: [UInt8], unwritten: [UInt8]) {
        self.unread = unread
        self.unwritten = unwritten
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if !unwritten.isEmpty {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: unwritten)), promise: nil)
        }
        if !unread.isEmpty {
            context.fireChannelRead(wrapInboundOut(ByteBuffer(bytes: unread)))
            context.fireChannelReadComplete()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
