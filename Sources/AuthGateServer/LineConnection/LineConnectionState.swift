/// The serving decisions of one handed-on connection (``RPCConnectionHandler``), with no I/O:
/// which line is served when, when the socket is read again, when answers are flushed and when
/// the connection closes. The handler tells it what happened (a line arrived, a request
/// finished, the channel's writability changed, the input ended) and does what it answers;
/// `LineConnectionStateTests` walks it through every case in process.
///
/// The rules: lines are served in order, one request at a time. A line that arrives while a
/// request is in flight, while others wait, or while the client does not read its answers (the
/// channel is not writable) waits; once a whole line waits the socket is not read again until
/// it is served, so a client cannot queue more than one read's worth of lines — and more than
/// ``maximumWaitingBytes`` waiting (a peer that hung up is drained whole) ends the connection.
/// Answers are flushed once per read or finished request, so pipelined answers share a write.
/// After the input ends (a half-close), the connection closes once every line is answered.
struct LineConnectionState {
    /// More bytes of lines waiting than this ends the connection.
    static let maximumWaitingBytes = 64 * 1024

    /// What to do with a line that arrived.
    enum Arrival: Equatable {
        /// Serve it now (answer it from the cache, or start its request).
        case serve
        /// It waits its turn (the state keeps it).
        case wait
        /// Too much waits: write the error line and close (``finish()``).
        case refuseTooMuchWaiting
        /// The connection is not served (refused at admission, or closing): drop it.
        case drop
    }

    /// Whether the connection was admitted; a refused one is answered `rate_limited` and closed.
    let admitted: Bool
    private var waiting: [LineFrame] = []
    private var waitingBytes = 0
    private(set) var requestInFlight = false
    /// The pipeline asked to read while lines waited; it reads once they are served.
    private var readHeld = false
    private var inputClosed = false
    /// A last line was written and the connection is closing: nothing more is served.
    private(set) var closing = false
    private var unflushed = false

    init(admitted: Bool) {
        self.admitted = admitted
    }

    var waitingCount: Int { waiting.count }

    mutating func lineArrived(_ frame: LineFrame, writable: Bool) -> Arrival {
        guard admitted, !closing else { return .drop }
        guard requestInFlight || !waiting.isEmpty || !writable else { return .serve }
        waiting.append(frame)
        waitingBytes += frame.byteCount
        return waitingBytes > Self.maximumWaitingBytes ? .refuseTooMuchWaiting : .wait
    }

    /// The next waiting line to serve now, if one may be: no request in flight, not closing,
    /// and the client reads its answers.
    mutating func nextWaiting(writable: Bool) -> LineFrame? {
        guard !requestInFlight, !closing, !waiting.isEmpty, writable else { return nil }
        let frame = waiting.removeFirst()
        waitingBytes -= frame.byteCount
        return frame
    }

    /// A line became a request for the dispatcher; lines wait until ``requestFinished()``.
    mutating func requestStarted() { requestInFlight = true }

    mutating func requestFinished() { requestInFlight = false }

    /// An answer was written (not flushed yet).
    mutating func answerWritten() { unflushed = true }

    /// Whether answers wait for a flush; they are flushed now.
    mutating func flushNow() -> Bool {
        defer { unflushed = false }
        return unflushed
    }

    /// The pipeline asks to read: whether to read now, or hold the read until the waiting lines
    /// are served and the client reads its answers (``resumeReading(writable:)``).
    mutating func readRequested(writable: Bool) -> Bool {
        guard closing || !waiting.isEmpty || !writable else { return true }
        readHeld = true
        return false
    }

    /// Whether a held read may go on now.
    mutating func resumeReading(writable: Bool) -> Bool {
        guard readHeld, !closing, waiting.isEmpty, writable else { return false }
        readHeld = false
        return true
    }

    /// The client half-closed (the decoder has passed on its last line).
    mutating func inputEnded() { inputClosed = true }

    /// Whether a half-closed connection has every line answered: then it closes (after its
    /// answers are written), and nothing more is served.
    mutating func closeIfDone() -> Bool {
        guard inputClosed, !requestInFlight, waiting.isEmpty, !closing else { return false }
        closing = true
        unflushed = false
        return true
    }

    /// A last line (an error) is written and the connection closes: what waits is dropped.
    mutating func finish() {
        closing = true
        waiting.removeAll()
        waitingBytes = 0
    }
}
