import AuthGateCore
import AuthGateRPC
import CLinux
import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Accepts every connection to the daemon's socket, on one thread with its own epoll, and
/// answers plain `token` and `credential.get` calls for a current token right there; every
/// other connection is handed on to NIO, with what was read from it, to be served by
/// ``RPCConnectionHandler``.
///
/// Most callers are short-lived processes (`authgate token`, the credential helpers) that
/// open a connection, ask for a token and close it. Through NIO alone such a connection costs
/// a channel and its pipeline of five handlers, promises for `SO_PEERCRED` and the close,
/// timers scheduled and cancelled, and a hop between event loops. Here it costs what the
/// kernel's `accept4`, `read`, `write` and `close` cost, plus a look at the line
/// (``RecentTokenAnswers``, ``TokenAnswers``), much as in a trivial C server
/// (docs/BENCHMARKS.md, "What was optimised", has the figures).
///
/// What stays here and what is handed on, and the deadlines, are ``ConnectionTable``'s
/// decisions; this type only makes the system calls they ask for. A connection over the
/// limits (``OpenConnections``) is handed on at once, to be told `rate_limited` and closed.
///
/// The thread sleeps in `epoll_wait` until a connection, a request or the next deadline;
/// ``stop()`` wakes it through an eventfd, and it closes the listener and its connections.
final class FrontDoor: Sendable {
    /// A connection handed on to NIO.
    struct HandOff: Sendable {
        var connection: ClientConnection
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
    private let answers: any TokenAnswers
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
    init(
        listener: Int32,
        limits: ConnectionLimits,
        connections: OpenConnections,
        answers: any TokenAnswers,
        logger: Logger,
        timeouts: BatchedNotices,
        handOff: @escaping @Sendable (HandOff) -> Void
    ) throws {
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
        let created = pthread_create(
            &thread,
            nil,
            { context in
                let door = Unmanaged<FrontDoor>.fromOpaque(context!).takeRetainedValue()
                door.serve()
                return nil
            },
            door.toOpaque()
        )
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

    /// The system calls ``ConnectionTable``'s decisions ask for; only the front door's thread
    /// touches it.
    private final class Loop {
        static let listenerTag = UInt64.max
        static let wakeTag = UInt64.max - 1
        /// Larger than any plain `token` line; a read that fills it is handed on (NIO reads the rest).
        static let readCapacity = 16 * 1024

        let door: FrontDoor
        let epoll: Int32
        var table: ConnectionTable
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readCapacity, alignment: 16)
        var recent = RecentTokenAnswers()
        /// Answers given in this batch of events, `token` and `credential.get` calls, counted in
        /// the metrics when it ends: one clock read, and two atomic additions for all the
        /// answers to one method, instead of per answer (the metrics'
        /// cost: docs/BENCHMARKS.md). Each answer is recorded with its batch's time, from
        /// `epoll_wait`'s return to the last answer: an upper bound of its own.
        var tokensAnsweredInBatch = 0
        var credentialsAnsweredInBatch = 0

        init(door: FrontDoor) {
            self.door = door
            table = ConnectionTable(limits: door.limits)
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
                if now >= table.nextCheck { expire(now) }
                let nextCheck = table.nextCheck
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
                if tokensAnsweredInBatch + credentialsAnsweredInBatch > 0 {
                    let within = Duration.nanoseconds(Self.uptime() - now)
                    if tokensAnsweredInBatch > 0 { door.answers.answered(.token, tokensAnsweredInBatch, eachWithin: within) }
                    if credentialsAnsweredInBatch > 0 { door.answers.answered(.credentialGet, credentialsAnsweredInBatch, eachWithin: within) }
                }
                tokensAnsweredInBatch = 0
                credentialsAnsweredInBatch = 0
            }
        }

        // MARK: Accepting

        /// Connections taken per wake-up at most; then the connections already held are served
        /// before more are taken (the listener stays ready: none is lost). Taking until the
        /// backlog was empty let a uid connecting in a loop keep this thread accepting, and
        /// everyone's requests waiting, for as long as it went on.
        static let acceptsPerWake = 64

        private func acceptAll(_ now: UInt64) {
            for _ in 0..<Self.acceptsPerWake {
                let descriptor = ag_accept(door.listener)
                guard descriptor >= 0 else {
                    switch errno {
                    case EAGAIN, EWOULDBLOCK: return
                    case EINTR, ECONNABORTED, EPROTO: continue
                    default:
                        // Out of descriptors or memory.
                        door.logger.warning("cannot accept connections for now", metadata: ["error": "\(String(cString: strerror(errno)))"])
                        _ = ag_epoll_modify(epoll, door.listener, 0, Self.listenerTag)
                        table.acceptingFailed(now: now)
                        return
                    }
                }
                accepted(descriptor, now)
            }
        }

        private func accepted(_ descriptor: Int32, _ now: UInt64) {
            // A connection accepted before a reload adds an executables rule has no pin, and
            // the rule refuses it (the daemon's AccessPolicy): it fails closed until it reconnects.
            guard var caller = PeerCredentials(socket: descriptor, pinProcess: door.answers.pinsProcesses) else {
                close(descriptor)
                return
            }
            if !door.limits.exemptsAdministrators { caller.isExempt = false }
            // Root and the daemon's own user administer it; everyone else holds at most a share.
            let share = caller.isUnbounded ? nil : door.limits.perUserShare
            guard let admission = door.connections.reserve(uid: caller.uid, limit: door.limits.maximumConnections, share: share) else {
                close(descriptor)  // the server has stopped
                return
            }
            let connection = ClientConnection(descriptor: descriptor, caller: caller, admission: admission, connections: door.connections)
            guard admission == .admitted else {
                door.handOff(HandOff(connection: connection, unread: [], unwritten: [], bytesArrived: false))
                return
            }
            door.logger.debug("connection opened", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
            guard ag_epoll_add(epoll, descriptor, EPOLLIN.rawValue, UInt64(descriptor)) == 0 else {
                connection.close()
                return
            }
            table.serve(connection, now: now)
        }

        // MARK: Serving

        private func read(_ descriptor: Int32, _ now: UInt64) {
            let count = Glibc.read(descriptor, readBuffer.baseAddress, readBuffer.count)
            if count < 0, errno == EAGAIN || errno == EINTR { return }
            let bytes = UnsafeRawBufferPointer(rebasing: readBuffer[0..<max(0, count)])
            var step = table.read(bytes, on: descriptor, capacity: readBuffer.count, now: now)
            if case .answer(let line, let uid) = step {
                let sent = recent.withAnswer(to: UnsafeRawBufferPointer(rebasing: bytes[line]), uid: uid, from: door.answers) { answer in
                    let sent = send(descriptor, answer.baseAddress, answer.count, Int32(MSG_NOSIGNAL))
                    if sent == answer.count { return ConnectionTable.Sent.all }
                    guard sent >= 0 || errno == EAGAIN else { return .failed }
                    return .part(Array(answer[max(0, sent)...]))
                }
                if let answered = sent {
                    if answered.method == .token { tokensAnsweredInBatch += 1 } else { credentialsAnsweredInBatch += 1 }
                    step = table.answered(descriptor, answered.result)
                } else {
                    step = table.unanswered(bytes, on: descriptor)
                }
            }
            perform(step)
        }

        private func perform(_ step: ConnectionTable.Step) {
            switch step {
            case .answer, .wait: break
            case .close(let connection): connection.close()
            case .handOn(let handOff):
                _ = epoll_ctl(epoll, EPOLL_CTL_DEL, handOff.connection.descriptor, nil)
                door.handOff(handOff)
            }
        }

        // MARK: Deadlines

        private func expire(_ now: UInt64) {
            let expired = table.expire(now: now)
            if expired.resumeAccepting { _ = ag_epoll_modify(epoll, door.listener, EPOLLIN.rawValue, Self.listenerTag) }
            for (connection, deadline) in expired.connections {
                let reason = deadline.reason(door.limits)
                door.timeouts.record(
                    reason,
                    message: "closing a connection: \(reason)",
                    uid: connection.caller.uid,
                    metadata: ["peer.pid": "\(connection.caller.pid)"]
                )
                connection.close()
            }
        }

        /// Closes every connection still here (the server is stopping).
        func closeAll() {
            for connection in table.removeAll() { connection.close() }
        }

        static func uptime() -> UInt64 { NIODeadline.now().uptimeNanoseconds }
    }
}
