import NIOCore

/// Bytes on their way from a client's connection to the upstream, in the order they came, taken
/// from the front. What one read of the connection gave is kept as it is when it is large; small
/// pieces are copied together into buffers of the queue's own, so that a client sending a few
/// bytes at a time costs the proxy those bytes, not a read buffer each, and taking from the front
/// costs the same however many pieces wait.
struct ByteQueue: Sendable {
    /// Pieces smaller than this are copied together.
    static let small = 4096
    /// The size of the queue's own buffers for small pieces.
    static let gathering = 16 << 10

    private var pieces = CircularBuffer<ByteBuffer>()
    /// The last piece is the queue's own, and small pieces may be added to it.
    private var lastIsOwn = false
    /// The bytes waiting.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The memory the waiting pieces hold (their buffers' capacities).
    var heldBytes: Int { pieces.reduce(0) { $0 + $1.capacity } }

    mutating func append(_ buffer: ByteBuffer) {
        let size = buffer.readableBytes
        guard size > 0 else { return }
        count += size
        guard size < Self.small else {
            pieces.append(buffer)
            lastIsOwn = false
            return
        }
        if lastIsOwn, let last = pieces.indices.last, pieces[last].writableBytes >= size {
            pieces[last].writeImmutableBuffer(buffer)
        } else {
            var own = ByteBufferAllocator().buffer(capacity: Self.gathering)
            own.writeImmutableBuffer(buffer)
            pieces.append(own)
            lastIsOwn = true
        }
    }

    /// Moves bytes from the front into `target`, as many as fit or wait; `copied` sees each run
    /// of them as it is copied. Returns how many.
    mutating func take(into target: UnsafeMutableRawBufferPointer, _ copied: (UnsafeRawBufferPointer) -> Void = { _ in }) -> Int {
        var filled = 0
        while filled < target.count, let first = pieces.indices.first {
            let moved = pieces[first].withUnsafeReadableBytes { bytes in
                let moved = min(bytes.count, target.count - filled)
                let run = UnsafeRawBufferPointer(rebasing: bytes.prefix(moved))
                UnsafeMutableRawBufferPointer(rebasing: target[filled...]).copyMemory(from: run)
                copied(run)
                return moved
            }
            pieces[first].moveReaderIndex(forwardBy: moved)
            if pieces[first].readableBytes == 0 { removeFirst() }
            filled += moved
        }
        count -= filled
        return filled
    }

    /// The front piece, removed.
    mutating func popFirst() -> ByteBuffer? {
        guard !pieces.isEmpty else { return nil }
        let first = pieces[pieces.startIndex]
        removeFirst()
        count -= first.readableBytes
        return first
    }

    private mutating func removeFirst() {
        pieces.removeFirst()
        if pieces.isEmpty { lastIsOwn = false }
    }
}
