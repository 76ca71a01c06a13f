import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import Logging
import NIOCore

/// Serves one connection: answers its request lines in order, one at a time. What is served
/// when is ``LineConnectionState``'s decision; this handler does the I/O it asks for.
///
/// A plain `token` or `credential.get` call for a current token is answered right here, on the
/// connection's event loop (``TokenAnswers``): the front door answers such lines only on
/// connections it still holds, and a client that made another call first, or sends several
/// lines at once, is served here (what that saves: docs/BENCHMARKS.md, "The NIO handler's
/// cached path"). Any other line becomes a request task (owned by
/// ``OpenConnections``) that runs the ``RequestResponder``; lines that arrive meanwhile wait their turn,
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
    private var state: LineConnectionState
    private let responder: any RequestResponder
    private let answers: any TokenAnswers
    private let connections: OpenConnections
    private let limits: ConnectionLimits
    private let logger: Logger
    /// Where a line over the limit is logged, batched.
    private let oversizedLines: BatchedNotices
    /// Made on the first request that needs the responder; `token.watch` writes through it.
    private var watchSink: WatchSink?

    /// - Parameter admission: Anything but `admitted`: the connection gets `rate_limited` and is closed.
    init(
        caller: PeerCredentials,
        admission: OpenConnections.Admission,
        responder: any RequestResponder,
        answers: any TokenAnswers,
        connections: OpenConnections,
        limits: ConnectionLimits,
        oversizedLines: BatchedNotices,
        logger: Logger
    ) {
        self.oversizedLines = oversizedLines
        self.caller = caller
        self.admission = admission
        state = LineConnectionState(admitted: admission == .admitted)
        self.responder = responder
        self.answers = answers
        self.connections = connections
        self.limits = limits
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        guard !state.admitted else { return }
        // Logged by BatchedNotices (RPCServer), one summary an interval.
        let message =
            admission == .tooManyOfOneUser
            ? "authgated serves at most \(limits.perUserShare) connections of one user at once, and yours are open; close some and try again."
            : "authgated serves at most \(limits.maximumConnections) connections at once; try again in a moment."
        let error = AuthGateError(.rateLimited, message, retryAfterSeconds: 1)
        finish(context, with: RPCLine.error(error, id: nil))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch state.lineArrived(frame, writable: context.channel.isWritable) {
        case .serve:
            serve(frame, context)
        case .refuseTooMuchWaiting:
            let error = AuthGateError(
                .requestTooLarge,
                "More than \(LineConnectionState.maximumWaitingBytes / 1024) KiB of request lines wait for their answers; read the answers before sending more. Closing the connection."
            )
            finish(context, with: RPCLine.error(error, id: nil))
        case .wait, .drop:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushAnswers(context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed {
            // The line decoder has passed on the last, unterminated line by now.
            state.inputEnded()
            closeIfDone(context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Holds reads while a whole line is waiting or the client does not take its answers.
    func read(context: ChannelHandlerContext) {
        if state.readRequested(writable: context.channel.isWritable) { context.read() }
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
            // One line, then a count every 10 s: a loop of oversized lines cannot flood the log.
            oversizedLines.record("request line too long", message: "request line too long; closing the connection", uid: caller.uid, on: context.eventLoop)
            let error = AuthGateError(.requestTooLarge, "A request line may be at most \(RPCCoding.maximumLineLength) bytes; closing the connection.")
            finish(context, with: RPCLine.error(error, id: nil))
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
        state.requestStarted()
        let eventLoop = context.eventLoop
        let handler = NIOLoopBound((self, context), eventLoop: eventLoop)
        let sink = watchSink ?? WatchSink(channel: context.channel, uid: caller.uid, logger: logger)
        watchSink = sink
        // As many requests under way as connections, for a uid: a request's task outlives a
        // connection that closes before its answer (a slow provider), so a loop of connect,
        // request, close would otherwise pile up tasks beyond the connection share.
        let share = caller.isUnbounded ? nil : limits.perUserShare
        let admitted = connections.run(on: eventLoop, uid: caller.uid, share: share) { [responder, caller] in
            let response = await responder.respond(to: Data(line.readableBytesView), from: caller, watchSink: sink)
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
        guard admitted else {
            // Answered as the dispatcher would: with the request's id, and a notification with
            // the empty write every line gets.
            let envelope = try? JSONDecoder().decode(RPCRequestEnvelope.self, from: Data(line.readableBytesView))
            guard envelope?.hasID != false else { return requestFinished(nil, context) }
            let error = AuthGateError(
                .rateLimited,
                "authgated runs at most \(limits.perUserShare) requests of one user at once, those of connections closed before their answers included; try again when they have ended.",
                retryAfterSeconds: 1
            )
            requestFinished(Data(RPCLine.error(error, id: envelope?.id)), context)
            return
        }
    }

    private func requestFinished(_ response: Data?, _ context: ChannelHandlerContext) {
        state.requestFinished()
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
        while let frame = state.nextWaiting(writable: context.channel.isWritable) {
            serve(frame, context)
        }
    }

    private func write(_ answer: ByteBuffer, _ context: ChannelHandlerContext) {
        // Flushed once per read (or per finished request), so pipelined answers share a write.
        context.write(wrapOutboundOut(answer), promise: nil)
        state.answerWritten()
    }

    private func flushAnswers(_ context: ChannelHandlerContext) {
        if state.flushNow() { context.flush() }
    }

    /// Writes a last line and closes.
    private func finish(_ context: ChannelHandlerContext, with line: [UInt8]) {
        state.finish()
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: line))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Closes a half-closed connection once every answer is written (writes complete in
    /// order, and a close would drop those still queued for a client that reads slowly).
    private func closeIfDone(_ context: ChannelHandlerContext) {
        guard state.closeIfDone() else { return }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer())).whenComplete { _ in channel.close(promise: nil) }
    }

    private func resumeReading(_ context: ChannelHandlerContext) {
        if state.resumeReading(writable: context.channel.isWritable) { context.read() }
    }
}
