import AuthGateCore
import NIOCore

/// Answers a plain `token` call for a session's current token where its line was read: on the
/// connection's event loop, with no task, no actor and no JSON coder.
///
/// It answers only what needs no decision: a ``PlainTokenRequest`` for a provider in
/// ``OpenProviders`` (usable, no access rules) whose session has a token in
/// ``PublishedTokens`` that stays valid long enough. Everything else — a refresh, an error,
/// access rules, other methods — goes the ordinary way through ``RPCDispatcher``, with the
/// same result either way: published tokens are what the session manager would return.
///
/// What it buys, measured with `scripts/bench` (docs/BENCHMARKS.md): the cached `token` call
/// is the one every API call of every client makes, and through the dispatcher it cost
/// ~117 µs of CPU (JSON decoding and encoding, the async channel bridge, two actor hops).
struct CachedTokenAnswers: Sendable {
    let tokens: PublishedTokens
    let providers: OpenProviders

    /// The whole answer line, or `nil` when the dispatcher must answer.
    func answer(to line: ByteBuffer, uid: UInt32, allocator: ByteBufferAllocator) -> ByteBuffer? {
        guard let request = line.withUnsafeReadableBytes({ PlainTokenRequest($0) }), providers.contains(request.provider) else { return nil }
        let key = PublishedTokens.Key(uid: uid, provider: request.provider, session: request.session ?? SessionName.default.rawValue)
        guard let result = tokens.result(for: key, minimumValidity: request.minimumValidity ?? MethodHandlers.defaultMinimumValidity) else {
            return nil
        }
        // The same line as RPCDispatcher's encodeSuccess.
        var answer = allocator.buffer(capacity: result.count + request.id.count + 48)
        answer.writeStaticString(#"{"id":"#)
        answer.writeBytes(request.id)
        answer.writeStaticString(#","jsonrpc":"2.0","result":"#)
        answer.writeBytes(result)
        answer.writeStaticString("}\n")
        return answer
    }
}

/// Puts ``CachedTokenAnswers`` in a connection's pipeline, between the line decoder and the
/// connection's task: a line it can answer is answered here; any other goes on to the task.
///
/// Answers keep the order of their requests: once a line has gone to the task, every later
/// line follows it there until the task has answered all of them (it writes one buffer per
/// line, counted here). While the client does not read its answers (the socket is not
/// writable), lines also go to the task, whose writes wait for the client.
final class CachedTokenHandler: ChannelDuplexHandler {
    typealias InboundIn = LineFrame
    typealias InboundOut = LineFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let answers: CachedTokenAnswers
    private let uid: UInt32
    /// Lines passed on to the task and not answered yet.
    private var passedOn = 0
    private var unflushed = false

    init(answers: CachedTokenAnswers, uid: UInt32) {
        self.answers = answers
        self.uid = uid
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if passedOn == 0, context.channel.isWritable, case .line(let line) = unwrapInboundIn(data),
           let answer = answers.answer(to: line, uid: uid, allocator: context.channel.allocator) {
            // Flushed once per read, so that pipelined requests share a write.
            context.write(wrapOutboundOut(answer), promise: nil)
            unflushed = true
            return
        }
        passedOn += 1
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushAnswers(context)
        context.fireChannelReadComplete()
    }

    /// The last line of a half-closed connection arrives without a read completing.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        flushAnswers(context)
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        passedOn = max(0, passedOn - 1)
        context.write(data, promise: promise)
    }

    private func flushAnswers(_ context: ChannelHandlerContext) {
        guard unflushed else { return }
        unflushed = false
        context.flush()
    }
}
