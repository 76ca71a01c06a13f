/// The connections the front door serves, and every decision about them, as a state machine:
/// each step takes an event (accepted, bytes read, an answer sent, the time) and says what to
/// do (answer this line, hand the connection on, close it, accept again). It makes no system
/// call and reads no clock — times are uptime nanoseconds the caller passes — so every rule
/// is tested in process, in milliseconds (`ConnectionTableTests`); ``FrontDoor``'s loop only
/// does the system calls.
///
/// The rules:
/// - A connection stays while every read brings exactly one complete line that is answered
///   at once. Anything else — two lines in one read, a partial line, a read that fills the
///   buffer, an answer the socket takes only in part — hands it on with the bytes read and the
///   answer bytes not written, so NIO serves it exactly as if it had read them itself.
/// - Its deadlines are ``ConnectionDeadline/quiet(bytesArrived:)``'s: the first byte within
///   `firstByteTimeout` of the accept, the next request within `idleTimeout` of the last.
///   A connection here never holds a partial line (that is handed on), so the request
///   deadline is NIO's.
/// - When accepting fails for lack of descriptors or memory, accepting pauses for
///   ``acceptPause`` rather than spinning on a listener that stays readable.
struct ConnectionTable {
    private struct Served {
        var connection: ClientConnection
        /// When it was accepted, then when its last request arrived.
        var since: UInt64
        var bytesArrived = false
    }

    /// What to do after a read, or after an answer was sent.
    enum Step {
        /// Answer the line in this range of the bytes read (without its line ending).
        case answer(line: Range<Int>, uid: UInt32)
        /// Hand the connection on to NIO; it is no longer here.
        case handOn(FrontDoor.HandOff)
        /// Close it (``ClientConnection/close()``); it is no longer here.
        case close(ClientConnection)
        /// Nothing: the connection waits for its next request.
        case wait
    }

    /// How much of an answer the socket took.
    enum Sent {
        case all
        /// The client is gone.
        case failed
        /// The rest, for NIO to write.
        case part([UInt8])
    }

    /// What ``expire(now:)`` found.
    struct Expired {
        /// Connections past a deadline, no longer here: to close, and log with the deadline.
        var connections: [(ClientConnection, ConnectionDeadline)] = []
        /// The accept pause is over.
        var resumeAccepting = false
    }

    /// How long accepting pauses after it failed for lack of descriptors or memory.
    static let acceptPause: UInt64 = 100_000_000

    let limits: ConnectionLimits
    private let firstByte: UInt64
    private let idle: UInt64
    /// Indexed by descriptor.
    private var served: [Served?] = []
    /// The connections here.
    private(set) var count = 0
    /// No deadline and no accept pause ends before this (`.max`: none is pending);
    /// ``expire(now:)`` has nothing to do until then.
    private(set) var nextCheck = UInt64.max
    /// Until when accepting is paused; `nil` while it is not.
    private(set) var acceptingPausedUntil: UInt64?

    init(limits: ConnectionLimits) {
        self.limits = limits
        firstByte = Self.nanoseconds(limits.firstByteTimeout)
        idle = Self.nanoseconds(limits.idleTimeout)
    }

    // MARK: Events

    /// An admitted connection, served here from now on.
    mutating func serve(_ connection: ClientConnection, now: UInt64) {
        let index = Int(connection.descriptor)
        if index >= served.count { served.append(contentsOf: repeatElement(nil, count: index + 1 - served.count)) }
        if served[index] == nil { count += 1 }
        served[index] = Served(connection: connection, since: now)
        nextCheck = min(nextCheck, now + firstByte)
    }

    /// Accepting failed for want of descriptors or memory: it pauses.
    mutating func acceptingFailed(now: UInt64) {
        acceptingPausedUntil = now + Self.acceptPause
        nextCheck = min(nextCheck, now + Self.acceptPause)
    }

    /// `bytes` were read from `descriptor` into a buffer of `capacity` bytes; none means the
    /// client closed the connection (or it failed).
    mutating func read(_ bytes: UnsafeRawBufferPointer, on descriptor: Int32, capacity: Int, now: UInt64) -> Step {
        let index = Int(descriptor)
        guard index < served.count, let connection = served[index]?.connection else { return .wait }
        guard let last = bytes.last else { return .close(remove(index)) }
        served[index]?.since = now
        served[index]?.bytesArrived = true
        if bytes.count < capacity, last == UInt8(ascii: "\n"), bytes.firstIndex(of: UInt8(ascii: "\n")) == bytes.count - 1 {
            var end = bytes.count - 1
            if end > 0, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            return .answer(line: 0..<end, uid: connection.caller.uid)
        }
        return handOn(index, unread: Array(bytes), unwritten: [])
    }

    /// The line ``read(_:on:capacity:now:)`` asked to answer has no answer here: the bytes read go on to NIO.
    mutating func unanswered(_ bytes: UnsafeRawBufferPointer, on descriptor: Int32) -> Step {
        handOn(Int(descriptor), unread: Array(bytes), unwritten: [])
    }

    /// The answer to the last line was sent, or `sent` of it.
    mutating func answered(_ descriptor: Int32, _ sent: Sent) -> Step {
        let index = Int(descriptor)
        guard index < served.count, served[index] != nil else { return .wait }
        switch sent {
        case .all:
            nextCheck = min(nextCheck, served[index]!.since + idle)
            return .wait
        case .failed: return .close(remove(index))
        case .part(let unwritten): return handOn(index, unread: [], unwritten: unwritten)
        }
    }

    /// The connections past a deadline at `now` (no longer here), and whether the accept
    /// pause ended; sets ``nextCheck`` to the next deadline.
    mutating func expire(now: UInt64) -> Expired {
        var expired = Expired()
        var next = UInt64.max
        if let pausedUntil = acceptingPausedUntil {
            if now >= pausedUntil {
                acceptingPausedUntil = nil
                expired.resumeAccepting = true
            } else {
                next = pausedUntil
            }
        }
        for index in served.indices {
            guard let connection = served[index] else { continue }
            let deadline = ConnectionDeadline.quiet(bytesArrived: connection.bytesArrived)
            let at = connection.since + (connection.bytesArrived ? idle : firstByte)
            if now >= at {
                expired.connections.append((remove(index), deadline))
            } else {
                next = min(next, at)
            }
        }
        nextCheck = next
        return expired
    }

    /// Every connection still here, no longer here (the server is stopping).
    mutating func removeAll() -> [ClientConnection] {
        served.indices.compactMap { served[$0] == nil ? nil : remove($0) }
    }

    // MARK: Helpers

    private mutating func remove(_ index: Int) -> ClientConnection {
        let connection = served[index]!.connection
        served[index] = nil
        count -= 1
        return connection
    }

    private mutating func handOn(_ index: Int, unread: [UInt8], unwritten: [UInt8]) -> Step {
        guard index < served.count, served[index] != nil else { return .wait }
        let bytesArrived = served[index]!.bytesArrived
        return .handOn(FrontDoor.HandOff(connection: remove(index), unread: unread, unwritten: unwritten, bytesArrived: bytesArrived))
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds)) / 1_000_000_000
    }
}
