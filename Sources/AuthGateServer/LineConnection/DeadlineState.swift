import NIOCore

/// The deadline decisions of a handed-on connection, with no timer and no clock of its own:
/// ``ConnectionDeadlines`` tells it what happened (bytes read, a read asked for, an answer
/// written, the input ended, a watch started) with the loop's time, and runs the timers it
/// asks for. The policy is ``ConnectionDeadline``'s, the same the front door's
/// ``ConnectionTable`` enforces; `DeadlineStateTests` walks it in process.
///
/// - No byte within `firstByteTimeout` of the connection's start: closed.
/// - A request line not finished within `requestTimeout` of its first byte: closed. More bytes
///   do not reset the clock; it does not run while the server holds reads behind a request in
///   flight (the clock starts when the server asks for more of an unfinished line).
/// - No partial line and no request waiting for its answer for `idleTimeout`: closed. A request
///   in progress never counts as idle, nor does a connection that carries a `token.watch`.
///
/// Requests are counted by their newlines and answers by their writes: the server writes one
/// buffer (possibly empty) for every line.
struct DeadlineState {
    /// What the timers should do after an event.
    struct Actions: Equatable {
        /// Stop the first-byte clock: a byte arrived.
        var stopFirstByteClock = false
        /// Start (`true`) or stop (`false`) the request clock; `nil`: leave it.
        var requestClock: Bool?
        /// Schedule the one idle check at this time (none is scheduled now).
        var idleCheckAt: NIODeadline?
    }

    /// What an idle check finds.
    enum IdleCheck: Equatable {
        /// Something is in progress: the next idle moment schedules a check again.
        case busy
        /// Idle since long enough: close.
        case close
        /// Idle, but not for long enough yet: check again then.
        case checkAgain(at: NIODeadline)
    }

    private let idleTimeout: TimeAmount
    private var partialLine = false
    private var unanswered = 0
    /// The connection carries a `token.watch`: quiet by nature, never closed for idling.
    private var watching = false
    private var anyByteArrived: Bool
    private var requestClockRunning = false
    /// One idle check at a time: it looks at ``idleSince`` when it fires rather than being
    /// cancelled and scheduled again on every line and answer (two cancellations and two
    /// schedulings per request, measured).
    private var idleCheckPending = false
    /// Since when nothing is in progress; `nil` while a line or an answer is.
    private(set) var idleSince: NIODeadline?

    /// - Parameter bytesArrived: A byte arrived already (the front door read it before handing
    ///   the connection on): no first-byte deadline.
    init(limits: ConnectionLimits, bytesArrived: Bool) {
        idleTimeout = TimeAmount(ConnectionDeadline.idle.duration(limits))
        anyByteArrived = bytesArrived
    }

    /// Whether the first-byte clock must run from the start.
    var needsFirstByteClock: Bool { !anyByteArrived }

    /// The connection is active.
    mutating func started(now: NIODeadline) -> Actions {
        var actions = Actions()
        rearmIdle(now, &actions)
        return actions
    }

    /// Bytes were read: `finishedLines` newlines among them, the last byte `last`.
    mutating func bytesRead(finishedLines: Int, last: UInt8, now: NIODeadline) -> Actions {
        var actions = Actions()
        if !anyByteArrived {
            anyByteArrived = true
            actions.stopFirstByteClock = true
        }
        unanswered += finishedLines
        partialLine = last != UInt8(ascii: "\n")
        // A finished line stops its clock; the next partial line starts its own.
        if finishedLines > 0 || !partialLine, requestClockRunning {
            requestClockRunning = false
            actions.requestClock = false
        }
        rearmIdle(now, &actions)
        return actions
    }

    /// The server asks for more bytes: an unfinished line's clock starts now.
    mutating func readRequested() -> Actions {
        guard partialLine, !requestClockRunning else { return Actions() }
        requestClockRunning = true
        return Actions(requestClock: true)
    }

    /// The input ended: an unfinished last line counts as a request (`printf '{…}' | nc -N`).
    mutating func inputEnded(now: NIODeadline) -> Actions {
        guard partialLine else { return Actions() }
        var actions = Actions()
        partialLine = false
        unanswered += 1
        if requestClockRunning {
            requestClockRunning = false
            actions.requestClock = false
        }
        rearmIdle(now, &actions)
        return actions
    }

    /// An answer (or the empty write for a blank line or a notification) was written.
    mutating func answerWritten(now: NIODeadline) -> Actions {
        unanswered = max(0, unanswered - 1)
        var actions = Actions()
        rearmIdle(now, &actions)
        return actions
    }

    /// The connection now carries a watch.
    mutating func watchStarted() {
        watching = true
        idleSince = nil
    }

    /// The scheduled idle check fired at `now`.
    mutating func idleCheckFired(now: NIODeadline) -> IdleCheck {
        idleCheckPending = false
        guard let since = idleSince else { return .busy }
        let closeAt = since + idleTimeout
        guard now >= closeAt else {
            idleCheckPending = true
            return .checkAgain(at: closeAt)
        }
        return .close
    }

    /// Starts the idle clock when the connection is idle now, and stops it otherwise.
    private mutating func rearmIdle(_ now: NIODeadline, _ actions: inout Actions) {
        guard unanswered == 0, !partialLine, !watching else {
            idleSince = nil
            return
        }
        idleSince = now
        if !idleCheckPending {
            idleCheckPending = true
            actions.idleCheckAt = now + idleTimeout
        }
    }
}
