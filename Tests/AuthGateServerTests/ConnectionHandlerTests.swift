import AuthGateTestSupport
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import AuthGateServer

/// The connection's NIO handlers in process, on an `EmbeddedChannel` with its own clock: line
/// framing and the deadlines, without a socket or a sleep.
@Suite("Connection handlers (EmbeddedChannel)")
struct ConnectionHandlerTests {
    // MARK: LineFrameDecoder

    /// What the decoder passes on for `chunks` (each one read), with end of input when `eof`.
    private func frames(_ chunks: [String], maximumLength: Int = 16, eof: Bool = false) throws -> [String] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LineFrameDecoder(maximumLength: maximumLength)))
        for chunk in chunks {
            try channel.writeInbound(ByteBuffer(string: chunk))
        }
        if eof { try channel.close().wait() }
        var out: [String] = []
        while let frame = try channel.readInbound(as: LineFrame.self) {
            switch frame {
            case .line(let line): out.append(String(buffer: line))
            case .tooLong: out.append("<too long>")
            }
        }
        return out
    }

    @Test("lines split across reads and joined in one, CRLF taken as LF, blank lines kept")
    func lines() throws {
        #expect(try frames(["{\"a\":", "1}\n{\"b\"", ":2}\r\n\n"]) == [#"{"a":1}"#, #"{"b":2}"#, ""])
        #expect(try frames(["one\ntwo\nthree\n"]) == ["one", "two", "three"])
    }

    @Test("an unterminated last line is a line at the end of input, not before")
    func lastLine() throws {
        #expect(try frames(["abc"]) == [])
        #expect(try frames(["abc"], eof: true) == ["abc"])
    }

    @Test("a line over the limit is reported once and everything after it is dropped; so is a stream with no newline")
    func tooLong() throws {
        #expect(try frames(["0123456789abcdef\n"]) == ["0123456789abcdef"], "exactly the limit is fine")
        #expect(try frames(["0123456789abcdefX\nnext\n"]) == ["<too long>"])
        #expect(try frames(["0123456789", "abcdefXYZ", "more\nnext\n"]) == ["<too long>"])
    }

    @Test("no newline: the decoder holds at most the limit, whatever arrives")
    func bounded() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LineFrameDecoder(maximumLength: 1024)))
        for _ in 0..<100 { try channel.writeInbound(ByteBuffer(repeating: UInt8(ascii: "x"), count: 512)) }
        var frames = 0
        while try channel.readInbound(as: LineFrame.self) != nil { frames += 1 }
        #expect(frames == 1, "one .tooLong")
    }

    // MARK: ConnectionDeadlines

    private final class Closed: Sendable {
        let reasons = Mutex<[String]>([])
        var all: [String] { reasons.withLock { $0 } }
    }

    private func deadlineChannel(_ limits: ConnectionLimits) throws -> (EmbeddedChannel, Closed) {
        let closed = Closed()
        let channel = EmbeddedChannel(handler: ConnectionDeadlines(limits: limits) { reason in closed.reasons.withLock { $0.append(reason) } })
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/authgate-embedded")).wait()
        return (channel, closed)
    }

    private let limits = ConnectionLimits(requestTimeout: .seconds(10), idleTimeout: .seconds(300), firstByteTimeout: .seconds(2))

    @Test("no byte within the first-byte deadline: closed; one byte in time stops that clock")
    func firstByte() throws {
        let (silent, closed) = try deadlineChannel(limits)
        silent.embeddedEventLoop.advanceTime(by: .milliseconds(1999))
        #expect(silent.isActive)
        silent.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!silent.isActive && closed.all.first?.contains("nothing arrived") == true, "\(closed.all)")

        let (talking, _) = try deadlineChannel(limits)
        try talking.writeInbound(ByteBuffer(string: "{"))
        talking.embeddedEventLoop.advanceTime(by: .seconds(3))
        #expect(talking.isActive)
    }

    @Test("an unfinished line must be finished within the request deadline; more bytes do not reset it; a newline stops it")
    func requestLine() throws {
        let (dripping, closed) = try deadlineChannel(limits)
        for _ in 0..<9 {
            try dripping.writeInbound(ByteBuffer(string: "x"))
            dripping.read()  // the server asks for more of the line
            dripping.embeddedEventLoop.advanceTime(by: .seconds(1))
        }
        #expect(dripping.isActive)
        dripping.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!dripping.isActive && closed.all == ["the request line was not finished in time"], "\(closed.all)")

        let (finished, _) = try deadlineChannel(limits)
        try finished.writeInbound(ByteBuffer(string: "{}"))
        finished.read()
        try finished.writeInbound(ByteBuffer(string: "\n"))
        finished.embeddedEventLoop.advanceTime(by: .seconds(20))
        #expect(finished.isActive, "a finished line waiting for its answer is neither late nor idle")
    }

    @Test("idle: closed after the idle deadline with nothing in progress; a request waiting for its answer never is")
    func idle() throws {
        let (channel, closed) = try deadlineChannel(limits)
        try channel.writeInbound(ByteBuffer(string: "{\"id\":1}\n"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(600))
        #expect(channel.isActive, "the request is still in progress")
        try channel.writeOutbound(ByteBuffer(string: "{\"id\":1,\"result\":{}}\n"))  // its answer
        channel.embeddedEventLoop.advanceTime(by: .seconds(299))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive && closed.all == ["the connection was idle"], "\(closed.all)")
    }

    @Test("a client that pipelines lines and reads none of its answers is closed after the idle time; reading some starts the clock again")
    func unreadAnswers() throws {
        let (channel, closed) = try deadlineChannel(limits)
        try channel.writeInbound(ByteBuffer(string: "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n"))
        try channel.writeOutbound(ByteBuffer(string: "{\"id\":1,\"result\":{}}\n"))
        // NIO's outbound buffer is past its high-water mark: the client reads nothing.
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(200))
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(299))
        #expect(channel.isActive, "the client read some: its clock started again")
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive && closed.all == ["its answers were not read for 300.0 seconds"], "\(closed.all)")
    }

    // MARK: HandedOnBytes

    @Test("a handed-on connection first gets the rest of an answer, then the lines read are served, then the socket is read")
    func handedOnBytes() throws {
        let channel = EmbeddedChannel()
        let served = RecordedLines()
        try channel.pipeline.syncOperations.addHandlers([
            HandedOnBytes(unread: Array("first\nsec".utf8), unwritten: Array("rest of an answer\n".utf8)),
            ByteToMessageHandler(LineFrameDecoder(maximumLength: 100)), served,
        ])
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/authgate-embedded")).wait()
        #expect(try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "rest of an answer\n")
        #expect(served.lines == ["first"])
        try channel.writeInbound(ByteBuffer(string: "ond\nthird\n"))
        #expect(served.lines == ["first", "second", "third"], "what the front door read comes before what NIO reads")
        #expect(throws: (any Error).self, "it left the pipeline") { try channel.pipeline.syncOperations.handler(type: HandedOnBytes.self) }
    }
}

/// The lines a pipeline passes on.
private final class RecordedLines: ChannelInboundHandler {
    typealias InboundIn = LineFrame
    var lines: [String] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .line(let line) = unwrapInboundIn(data) { lines.append(String(buffer: line)) }
    }
}
