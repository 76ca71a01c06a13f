import NIOCore

/// What the line decoder passes on: a complete line, or the news that a line was too long.
enum LineFrame: Sendable {
    /// One line without its `\n` (and without a trailing `\r`).
    case line(ByteBuffer)
    /// A line exceeded the limit; nothing more is read from this connection.
    case tooLong

    /// The line's bytes (with one for its newline), for bounding what waits.
    var byteCount: Int {
        switch self {
        case .line(let line): line.readableBytes + 1
        case .tooLong: 0
        }
    }
}

/// Splits the byte stream into `\n`-terminated lines of at most `maximumLength` bytes (newline
/// not counted).
///
/// Bounded on purpose: NIO's `LineBasedFrameDecoder` buffers without limit, and a client that
/// never sends a newline must not make the daemon grow. After `.tooLong` the decoder discards
/// everything, so the connection can be answered and closed.
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = LineFrame

    let maximumLength: Int
    private var overflowed = false
    /// How far the current buffer has already been searched for a newline.
    private var scanned = 0

    init(maximumLength: Int) {
        self.maximumLength = maximumLength
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if overflowed {
            buffer.moveReaderIndex(to: buffer.writerIndex)
            return .needMoreData
        }
        let view = buffer.readableBytesView
        if let newline = view.dropFirst(scanned).firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - view.startIndex
            scanned = 0
            guard length <= maximumLength else { return overflow(context: context, buffer: &buffer) }
            guard var line = buffer.readSlice(length: length) else { return .needMoreData }  // never: the newline is in the buffer
            buffer.moveReaderIndex(forwardBy: 1)
            if line.readableBytesView.last == UInt8(ascii: "\r") {
                line.moveWriterIndex(to: line.writerIndex - 1)
            }
            context.fireChannelRead(wrapInboundOut(.line(line)))
            return .continue
        }
        scanned = view.count
        if view.count > maximumLength { return overflow(context: context, buffer: &buffer) }
        return .needMoreData
    }

    /// At end of input, an unterminated last line still counts (`printf '{…}' | nc -U`).
    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        if !overflowed, buffer.readableBytes > 0, let line = buffer.readSlice(length: buffer.readableBytes) {
            context.fireChannelRead(wrapInboundOut(.line(line)))
        }
        return .needMoreData
    }

    private mutating func overflow(context: ChannelHandlerContext, buffer: inout ByteBuffer) -> DecodingState {
        overflowed = true
        buffer.moveReaderIndex(to: buffer.writerIndex)
        context.fireChannelRead(wrapInboundOut(.tooLong))
        return .needMoreData
    }
}
