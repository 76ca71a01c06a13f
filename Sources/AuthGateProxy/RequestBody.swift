import AuthGateHTTP
import NIOConcurrencyHelpers
import NIOCore

/// A request's body between the client's connection (which pushes what it reads, on its event
/// loop) and its exchange (which libcurl makes read it, on the exchanges' thread): about
/// ``highWater`` bytes wait in between, past which the connection stops reading until libcurl
/// has taken them below ``lowWater``; when nothing waits, the exchange pauses until the
/// connection brings more (``ByteQueue``: a body sent a byte at a time holds its bytes, not a
/// read buffer each). The first ``keptBytes`` are kept, so that a request whose body was small
/// can be sent again (after a nonce or a refused token).
final class RequestBody: StreamedRequestBody, @unchecked Sendable {
    static let highWater = 256 << 10
    static let lowWater = 64 << 10
    /// The largest body a request may have to be sent again.
    static let keptBytes = 64 << 10

    // Every property but `resume` is guarded by the lock.
    private let lock = NIOLock()
    private var queue = ByteQueue()
    private var finished = false
    private var failed = false
    private var paused = false
    private var kept: [UInt8] = []
    private var keptAll = true
    private var replayed: Int?
    /// The exchange paused for more of the body.
    private var waiting: StreamedExchange?
    /// Called (on the exchanges' thread) when the connection may read again.
    private let resume: @Sendable () -> Void

    init(resume: @escaping @Sendable () -> Void) {
        self.resume = resume
    }

    /// Adds what the client sent. Returns whether the connection should stop reading.
    func push(_ buffer: ByteBuffer) -> Bool {
        let (pause, exchange) = lock.withLock { () -> (Bool, StreamedExchange?) in
            queue.append(buffer)
            // Set here, cleared only by the reader when it asks the connection to read again: the
            // connection stops reading from the first push past the high water until that call.
            if queue.count > Self.highWater { paused = true }
            return (paused, takeWaiting())
        }
        exchange?.resume()
        return pause
    }

    /// The client sent the whole body.
    func finish() {
        lock.withLock {
            finished = true
            return takeWaiting()
        }?.resume()
    }

    /// The client went away: the reader gets `.failed`.
    func fail() {
        lock.withLock {
            failed = true
            return takeWaiting()
        }?.resume()
    }

    private func takeWaiting() -> StreamedExchange? {
        defer { waiting = nil }
        return waiting
    }

    /// Whether the whole body has arrived and was kept: the request can be sent again.
    var isReplayable: Bool {
        lock.withLock { finished && keptAll }
    }

    /// The next read starts over from the body's first byte, when all that was read so far was
    /// kept: for the request sent once more after a nonce or a refused token (``isReplayable``
    /// holds), and for libcurl sending it again on a new connection.
    func restart() -> Bool {
        lock.withLock {
            guard keptAll else { return false }
            replayed = 0
            return true
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, exchange: StreamedExchange) -> StreamedRead {
        guard buffer.count > 0 else { return .later }
        let (outcome, resumes) = lock.withLock { () -> (StreamedRead, Bool) in
            if let position = replayed, position < kept.count {
                let count = min(buffer.count, kept.count - position)
                kept.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + position, byteCount: count) }
                replayed = position + count
                return (.bytes(count), false)
            }
            replayed = nil
            if failed { return (.failed, false) }
            guard !queue.isEmpty else {
                if finished { return (.end, false) }
                waiting = exchange
                return (.later, false)
            }
            let count = queue.take(into: buffer) { run in
                if keptAll && kept.count + run.count <= Self.keptBytes {
                    kept.append(contentsOf: run)
                } else {
                    keptAll = false
                    kept = []
                }
            }
            let resumes = paused && queue.count < Self.lowWater
            if resumes { paused = false }
            return (.bytes(count), resumes)
        }
        if resumes { resume() }
        return outcome
    }
}
