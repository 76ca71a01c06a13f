package import AuthGateRPC
package import NIOCore

extension RPCLine {
    /// ``RPCLine/success(id:result:into:)`` into a NIO buffer: the answers of the front door's
    /// cache (``TokenAnswers``) and of the daemon's dispatcher.
    package static func success(id: some Sequence<UInt8>, result: some Sequence<UInt8>, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(successOpening)
        buffer.writeBytes(id)
        buffer.writeStaticString(successMiddle)
        buffer.writeBytes(result)
        buffer.writeStaticString(successClosing)
    }
}
