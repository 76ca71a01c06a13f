import NIOCore

/// The first handler of a connection ``FrontDoor`` handed on: when the channel becomes active,
/// before NIO reads anything from the socket, it writes the end of an answer the front door
/// could not write and passes on the bytes the front door read, then leaves the pipeline.
final class HandedOnBytes: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let unread: [UInt8]
    private let unwritten: [UInt8]

    init(unread: [UInt8], unwritten: [UInt8]) {
        self.unread = unread
        self.unwritten = unwritten
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        if !unwritten.isEmpty {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: unwritten)), promise: nil)
        }
        if !unread.isEmpty {
            context.fireChannelRead(wrapInboundOut(ByteBuffer(bytes: unread)))
            context.fireChannelReadComplete()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
