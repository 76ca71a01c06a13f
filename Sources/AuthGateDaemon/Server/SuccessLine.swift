import NIOCore

/// A success answer's line, `{"id":ID,"jsonrpc":"2.0","result":RESULT}` and a newline, from an
/// id and a result that are JSON already. The cached path (``CachedTokenAnswers``) and the
/// dispatcher both write their answers here, so the same call gets the same bytes either way.
enum SuccessLine {
    static func write(id: some Sequence<UInt8>, result: some Sequence<UInt8>, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(#"{"id":"#)
        buffer.writeBytes(id)
        buffer.writeStaticString(#","jsonrpc":"2.0","result":"#)
        buffer.writeBytes(result)
        buffer.writeStaticString("}\n")
    }

    /// The bytes `write` adds besides the id and the result.
    static let framingLength = 34
}
