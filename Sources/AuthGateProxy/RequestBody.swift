import AuthGateHTTP
import NIOConcurrencyHelpers
import NIOCore

/// A request's body between the client's connection (which pushes what it reads, on its event
/// loop) and the exchange's thread (which libcurl makes read it): about ``highWater`` bytes
/// wait in between, past which the connection stops reading until libcurl has taken them
/// below ``lowWater``. The first ``keptBytes`` are kept, so that a request whose body was
/// small can be sent again (after a nonce or a refused token).
final class RequestBody: StreamedRequestBody, @unchecked Sendable {
    static let highWater = 256 << 10
    static let lowWater = 64 << 10
    /// The largest body a request may have to be sent again.
    static let keptBytes = 64 << 10

    // `lock`'s value: 1 when there is something to read (bytes, the end, or a failure), else 0.
    // Every other property is guarded by it.
    private let lock = ConditionLock(value: 0)
    private var chunks: [ByteBuffer] = []
    private var queued = 0
    private var finished = false
    private var failed = false
    private var paused = false
    private var kept: [UInt8] = []
    private var keptAll = true
    private var replayed: Int?
    private let idleSeconds: Int
    /// Called (on the exchange's thread) when the connection may read again.
    private let resume: @Sendable () -> Void

    init(idleSeconds: Int, resume: @escaping @Sendable () -> Void) {
        self.idleSeconds = idleSeconds
        self.resume = resume
    }

    /// Adds what the client sent. Returns whether the connection should stop reading.
    func push(_ buffer: ByteBuffer) -> Bool {
        lock.lock()
        chunks.append(buffer)
        queued += buffer.readableBytes
        // Set here, cleared only by the reader when it asks the connection to read again: the
        // connection stops reading from the first push past the high water until that call.
        if queued > Self.highWater { paused = true }
        let pause = paused
        lock.unlock(withValue: 1)
        return pause
    }

    /// The client sent the whole body.
    func finish() {
        lock.lock()
        finished = true
        lock.unlock(withValue: 1)
    }

    /// The client went away: the reader gets `nil`.
    func fail() {
        lock.lock()
        failed = true
        lock.unlock(withValue: 1)
    }

    /// Whether the whole body has arrived and was kept: the request can be sent again.
    var isReplayable: Bool {
        lock.lock()
        defer { lock.unlock() }
        return finished && keptAll
    }

    /// The next read starts over from the body's first byte (``isReplayable`` must hold).
    func rewind() {
        lock.lock()
        replayed = 0
        lock.unlock()
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard buffer.count > 0 else { return 0 }
        lock.lock()
        if let position = replayed, position < kept.count {
            let count = min(buffer.count, kept.count - position)
            kept.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + position, byteCount: count) }
            replayed = position + count
            lock.unlock()
            return count
        }
        replayed = nil
        lock.unlock()
        guard lock.lock(whenValue: 1, timeoutSeconds: Double(idleSeconds)) else { return nil }
        if failed {
            lock.unlock(withValue: 1)
            return nil
        }
        guard !chunks.isEmpty else {
            lock.unlock(withValue: 1)  // finished
            return 0
        }
        let count = min(buffer.count, chunks[0].readableBytes)
        chunks[0].withUnsafeReadableBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: count)
            if keptAll && kept.count + count <= Self.keptBytes {
                kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes.prefix(count)))
            } else {
                keptAll = false
                kept = []
            }
        }
        chunks[0].moveReaderIndex(forwardBy: count)
        if chunks[0].readableBytes == 0 { chunks.removeFirst() }
        queued -= count
        let resumes = paused && queued < Self.lowWater
        if resumes { paused = false }
        lock.unlock(withValue: chunks.isEmpty && !finished ? 0 : 1)
        if resumes { resume() }
        return count
    }
}
