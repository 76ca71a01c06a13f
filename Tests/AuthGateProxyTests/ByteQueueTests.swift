import NIOCore
import Testing

@testable import AuthGateProxy

/// The queue of a request's body (and a tunnel's client bytes) between the client's connection
/// and the upstream.
@Suite("The bytes waiting between a client and the upstream")
struct ByteQueueTests {
    @Test("a client sending a byte at a time costs the queue those bytes, not a read buffer each; they come out whole and in order")
    func smallPiecesHoldLittle() {
        var queue = ByteQueue()
        let allocator = ByteBufferAllocator()
        for index in 0..<100_000 {
            // As NIO hands a read over: a buffer of its own, here of 2 KiB holding one byte.
            var read = allocator.buffer(capacity: 2048)
            read.writeInteger(UInt8(truncatingIfNeeded: index))
            queue.append(read)
        }
        #expect(queue.count == 100_000)
        #expect(queue.heldBytes < 2 * 100_000, "\(queue.heldBytes) bytes held for 100,000 bytes (a buffer each: 200 MB)")
        var out = [UInt8](repeating: 0, count: 100_000)
        var taken = 0
        while !queue.isEmpty {
            taken += out.withUnsafeMutableBytes { queue.take(into: UnsafeMutableRawBufferPointer(rebasing: $0[taken..<min(taken + 7_000, $0.count)])) }
        }
        #expect(taken == 100_000 && out == (0..<100_000).map { UInt8(truncatingIfNeeded: $0) })
    }

    @Test("large pieces are kept as they came and taken across their edges; popFirst gives the front piece; a run is seen as it is copied")
    func largePiecesKept() {
        var queue = ByteQueue()
        let allocator = ByteBufferAllocator()
        queue.append(allocator.buffer(bytes: [UInt8](repeating: 1, count: 10_000)))
        queue.append(allocator.buffer(bytes: [2, 3]))
        queue.append(allocator.buffer(bytes: [UInt8](repeating: 4, count: 5_000)))
        #expect(queue.count == 15_002)
        var first = [UInt8](repeating: 0, count: 10_001)
        var seen = 0
        let moved = first.withUnsafeMutableBytes { queue.take(into: $0) { seen += $0.count } }
        #expect(moved == 10_001 && seen == 10_001 && first.last == 2 && first.dropLast().allSatisfy { $0 == 1 })
        #expect(queue.popFirst()?.readableBytesView.elementsEqual([3]) == true)
        #expect(queue.popFirst()?.readableBytes == 5_000 && queue.isEmpty && queue.popFirst() == nil)
        // Small pieces after the queue emptied go into a new buffer of its own.
        queue.append(allocator.buffer(bytes: [9]))
        #expect(queue.count == 1 && queue.popFirst()?.readableBytesView.elementsEqual([9]) == true)
    }
}
