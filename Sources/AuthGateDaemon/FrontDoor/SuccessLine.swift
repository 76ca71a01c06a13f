import NIOCore

/// A success answer's line, `{"id":ID,"jsonrpc":"2.0","result":RESULT}` and a newline, from an
/// id and a result that are JSON already. The cached path (``CachedTokenAnswers``) and the
/// dispatcher both write their answers here, so the same call gets the same bytes either way.
enum SuccessLine {
    private static let opening: StaticString = #"{"id":"#
    private static let middle: StaticString = #","jsonrpc":"2.0","result":"#
    private static let closing: StaticString = "}\n"

    static func write(id: some Sequence<UInt8>, result: some Sequence<UInt8>, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(opening)
        buffer.writeBytes(id)
        buffer.writeStaticString(middle)
        buffer.writeBytes(result)
        buffer.writeStaticString(closing)
    }

    static func write(id: [UInt8], result: [UInt8], into bytes: inout [UInt8]) {
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: opening.utf8Start, count: opening.utf8CodeUnitCount))
        bytes.append(contentsOf: id)
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: middle.utf8Start, count: middle.utf8CodeUnitCount))
        bytes.append(contentsOf: result)
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: closing.utf8Start, count: closing.utf8CodeUnitCount))
    }

    /// The bytes `write` adds besides the id and the result.
    static let framingLength = opening.utf8CodeUnitCount + middle.utf8CodeUnitCount + closing.utf8CodeUnitCount
}
