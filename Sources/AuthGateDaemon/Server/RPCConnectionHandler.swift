import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import Logging
import NIOCore

/// Serves one connection: answers its request lines in order, one at a time.
///
/// A plain `token` or `credential.get` call for a current token is answered right here, on the
/// connection's event loop (``CachedTokenAnswers``): the front door answers such lines only on
/// connections it still holds, and a client that made another call first, or sends several
/// lines at once, is served here (what that saves: docs/BENCHMARKS.md, "The NIO handler's
/// cached path"). Any other line becomes a request task (owned by
/// ``OpenConnections``) that runs the dispatcher; lines that arrive meanwhile wait their turn,
/// and once a whole line waits the socket is not read again until it is answered, so a client
/// cannot queue more than one read's worth of lines (an unfinished line behind a slow request
/// is still read to its end). Answers, cached ones too, are written only while the channel is
/// writable (NIO's outbound buffer under its 64 KiB high-water mark): a client that does not
/// read its answers finds its lines waiting, unanswered, and the socket not read, so the
/// daemon holds at most the high-water mark and one small read (``RPCServer``'s 4 KiB) per
/// connection.
///
/// Every line gets exactly one write — empty for blank lines and notifications — which is how
/// ``ConnectionDeadlines`` tells a busy connection from an idle one. A client that half-closes
/// after its last line (socat, `nc -N`) gets its answers, then the connection is closed.
///
/// Why not an `NIOAsyncChannel` and a task per connection, as before: for a new connection per
/// request that design handed each connection from the listener's loop to a task and back,
/// which cost nearly twice the CPU and context switches (docs/BENCHMARKS.md, "What was optimised").
final class RPCConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = LineFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let caller: PeerCredentials
    private let admission: OpenConnections.Admission
    private var admitted: Bool { admission == .admitted }
    private let dispatcher: RPCDispatcher
    private let answers: CachedTokenAnswers
    private let connections: OpenConnections
    private let limits: ConnectionLimits
    private let logger: Logger
    /// Made on the first request that needs the dispatcher; `token.watch` writes through it.
    private var watchSink: WatchSink?

    /// Lines waiting for the request in flight, or for the client to read its answers.
    private var waiting: [LineFrame] = []
    /// Their bytes: at most one read's worth while the socket is read in turn, but NIO drains a
    /// socket whose peer hung up whole (`readEOF`), so they are bounded here too.
    private var waitingBytes = 0
    /// More waiting than this closes the connection (see ``waitingBytes``).
    static let maximumWaitingBytes = 64 * 1024
    private var requestInFlight = false
    /// The pipeline asked to read while this handler was busy; it reads once the backlog is answered.
    private var readHeld = false
    private var inputClosed = false
    /// A last line (an error) was written and the connection is closing: nothing more is served.
    private var closing = false
    private var unflushed = false

    /// - Parameter admission: Anything but `admitted`: the connection gets `rate_limited` and is closed.
    init(
        caller: PeerCredentials,
        admission: OpenConnections.Admission,
        dispatcher: RPCDispatcher,
        answers: CachedTokenAnswers,
        connections: OpenConnections,
        limits: ConnectionLimits,
        logger: Logger
    ) {
        self.caller = caller
        self.admission = admission
        self.dispatcher = dispatcher
        self.answers = answers
        self.connections = connections
        self.limits = limits
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        guard !admitted else { return }
        // Logged by BatchedNotices (RPCServer), one summary an interval.
        let message =
            admission == .tooManyOfOneUser
            ? "authgated serves at most \(limits.perUserShare) connections of one user at once, and yours are open; close some and try again."
            : "authgated serves at most \(limits.maximumConnections) connections at once; try again in a moment."
        let error = AuthGateError(.rateLimited, message, retryAfterSeconds: 1)
        finish(context, with: dispatcher.encodeError(error, id: nil))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard admitted, !closing else { return }
        let frame = unwrapInboundIn(data)
        if requestInFlight || !waiting.isEmpty || !context.channel.isWritable {
            waiting.append(frame)
            waitingBytes += frame.byteCount
            if waitingBytes > Self.maximumWaitingBytes {
                let error = AuthGateError(
                    .requestTooLarge,
                    "More than \(Self.maximumWaitingBytes / 1024) KiB of request lines wait for their answers; read the answers before sending more. Closing the connection."
                )
                finish(context, with: dispatcher.encodeError(error, id: nil))
            }
        } else {
            serve(frame, context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushAnswers(context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed {
            // The line decoder has passed on the last, unterminated line by now.
            inputClosed = true
            closeIfDone(context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Holds reads while a whole line is waiting or the client does not take its answers.
    func read(context: ChannelHandlerContext) {
        if closing || !waiting.isEmpty || !context.channel.isWritable {
            readHeld = true
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        serveWaiting(context)
        flushAnswers(context)
        closeIfDone(context)
        resumeReading(context)
        context.fireChannelWritabilityChanged()
    }

    // MARK: Serving

    private func serve(_ frame: LineFrame, _ context: ChannelHandlerContext) {
        switch frame {
        case .tooLong:
            logger.notice("request line too long; closing the connection", metadata: ["peer.uid": "\(caller.uid)"])
            let error = AuthGateError(.requestTooLarge, "A request line may be at most \(RPCCoding.maximumLineLength) bytes; closing the connection.")
            finish(context, with: dispatcher.encodeError(error, id: nil))
        case .line(let line):
            if !line.readableBytesView.contains(where: { !$0.isJSONWhitespace }) {
                write(ByteBuffer(), context)
            } else if let answer = answers.answer(to: line, uid: caller.uid, allocator: context.channel.allocator) {
                write(answer, context)
            } else {
                startRequest(line, context)
            }
        }
    }

    private func startRequest(_ line: ByteBuffer, _ context: ChannelHandlerContext) {
        requestInFlight = true
        let eventLoop = context.eventLoop
        let handler = NIOLoopBound((self, context), eventLoop: eventLoop)
        let sink = watchSink ?? WatchSink(channel: context.channel, uid: caller.uid, logger: logger)
        watchSink = sink
        connections.run(on: eventLoop) { [dispatcher, caller] in
            let response = await dispatcher.respond(to: Data(line.readableBytesView), from: caller, watchSink: sink)
            // The task runs on this loop (EventLoopTaskExecutor), so this is normally no hop.
            if eventLoop.inEventLoop {
                let (self_, context) = handler.value
                self_.requestFinished(response, context)
            } else {
                eventLoop.execute {
                    let (self_, context) = handler.value
                    self_.requestFinished(response, context)
                }
            }
        }
    }

    private func requestFinished(_ response: Data?, _ context: ChannelHandlerContext) {
        requestInFlight = false
        write(response.map { ByteBuffer(bytes: $0) } ?? ByteBuffer(), context)
        // A token.watch just answered: its notifications may follow now.
        watchSink?.answerWritten()
        serveWaiting(context)
        flushAnswers(context)
        closeIfDone(context)
        resumeReading(context)
    }

    /// Serves the lines that wait, in order, while no request is in flight and the client takes
    /// its answers.
    private func serveWaiting(_ context: ChannelHandlerContext) {
        while !requestInFlight, !closing, !waiting.isEmpty, context.channel.isWritable {
            let frame = waiting.removeFirst()
            waitingBytes -= frame.byteCount
            serve(frame, context)
        }
    }

    private func write(_ answer: ByteBuffer, _ context: ChannelHandlerContext) {
        // Flushed once per read (or per finished request), so pipelined answers share a write.
        context.write(wrapOutboundOut(answer), promise: nil)
        unflushed = true
    }

    private func flushAnswers(_ context: ChannelHandlerContext) {
        guard unflushed else { return }
        unflushed = false
        context.flush()
    }

    /// Writes a last line and closes.
    private func finish(_ context: ChannelHandlerContext, with line: Data) {
        closing = true
        waiting.removeAll()
        waitingBytes = 0
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: line))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Closes a half-closed connection once every answer is written (writes complete in
    /// order, and a close would drop those still queued for a client that reads slowly).
    private func closeIfDone(_ context: ChannelHandlerContext) {
        guard inputClosed, !requestInFlight, waiting.isEmpty, !closing else { return }
        closing = true
        unflushed = false
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer())).whenComplete { _ in channel.close(promise: nil) }
    }

    private func resumeReading(_ context: ChannelHandlerContext) {
        guard readHeld, !closing, waiting.isEmpty, context.channel.isWritable else { return }
        readHeld = false
        context.read()
    }
}
