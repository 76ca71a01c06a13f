import AuthGateCore
import AuthGateHTTP
import Dispatch
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// One client connection's requests, on its event loop, after NIO's HTTP/1 server pipeline
/// (which decodes chunked bodies, holds pipelined requests until the answer before them has
/// ended, and answers malformed requests with 400).
///
/// A request the rules refuse is answered at once; one they forward becomes a
/// ``ProxyExchange`` on the proxy's exchanges' thread, to which this handler passes the body
/// (``RequestBody``, reading no more while 1 MiB waits) and from which it takes the answer
/// (``ClientAnswer``). A connection with no request under way is closed after the idle time.
final class ProxyConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let proxy: ProxyCore
    private let caller: UInt32?
    /// The request under way: its body and its answer.
    private var current: ClientAnswer?
    /// Parts of a refused request, which are read and dropped.
    private var discarding = false
    private var readsPaused = false
    private var readPending = false
    /// The answer under way ends by closing the connection (its client asked to, or an
    /// HTTP/1.0 client gets a body of no stated length, whose end only the close can mark).
    private var closesAfterAnswer = false
    /// Closes a connection whose next request head has not arrived in time (slow headers,
    /// or a connection opened and left): from the connection's start and each answer's end.
    private var headDeadline: Scheduled<Void>?

    init(proxy: ProxyCore, caller: UInt32?) {
        self.proxy = proxy
        self.caller = caller
    }

    func handlerAdded(context: ChannelHandlerContext) {
        awaitHead(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        headDeadline?.cancel()
    }

    private func awaitHead(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        let channel = context.channel
        headDeadline = context.eventLoop.scheduleTask(in: .seconds(Int64(proxy.configuration.headerSeconds))) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            headDeadline?.cancel()
            headDeadline = nil
            start(head, context: context)
        case .body(let buffer):
            guard !discarding, let body = current?.body else { return }
            if body.push(buffer) { readsPaused = true }
        case .end:
            if discarding {
                discarding = false
                return
            }
            current?.body?.finish()
            // An answer that ends the connection: nothing after this request is read (after an
            // upgrade with a body NIO's parser would only pile it up, unparsed).
            if current?.keepAlive == false { readsPaused = true }
        }
    }

    private func start(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        proxy.counts.withLock { $0.requests += 1 }
        let fields = head.headers.map { (name: $0.name, value: $0.value) }
        let target = ForwardingRules.target(method: head.method.rawValue, uri: head.uri, upstream: proxy.configuration.upstream)
        let bodyLength = ForwardingRules.bodyLength(fields)
        guard case .forward(let url) = target else {
            guard case .refuse(let answer) = target else { return }
            proxy.refused(answer)
            discarding = true
            // A refused request's body is not read, and what follows a refused CONNECT or
            // upgrade is not HTTP: the connection closes after the answer.
            write(answer, keepAlive: false, context: context)
            return
        }
        // An upgrade without a body becomes the connection's tunnel, if the upstream agrees
        // (one with a body goes on as an ordinary request, its Upgrade dropped, as RFC 9110
        // §7.8 lets a server ignore it).
        if bodyLength == nil, ForwardingRules.isUpgrade(fields) {
            return startUpgrade(head, url: url, fields: fields, context: context)
        }
        if head.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" }) {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        let body =
            bodyLength == nil
            ? nil
            : RequestBody {
                loop.execute { bound.value.handler.resumeReading(context: bound.value.context) }
            }
        let answer = ClientAnswer(
            bound: bound,
            version: head.version,
            // An upgrade with a body goes on as an ordinary request, but NIO's parser stops
            // after a message that asked to upgrade: what the client sends next would pile up
            // unparsed, without bound. Its answer ends the connection.
            keepAlive: head.isKeepAlive && !ForwardingRules.isUpgrade(fields),
            body: body
        )
        current = answer
        let exchange = ProxyExchange(
            proxy: proxy,
            method: head.method.rawValue,
            url: url,
            fields: ForwardingRules.requestFields(fields),
            bodyLength: bodyLength,
            client: answer
        )
        exchange.start()
    }

    /// Sends an upgrade request upstream on a thread of its own (the tunnel's), reading nothing more from the
    /// client until its answer has come: a 101 switches the connection to a tunnel
    /// (``switchProtocols(fields:relay:answer:context:)``), anything else is answered and closes it.
    private func startUpgrade(_ head: HTTPRequestHead, url: URL, fields: [(name: String, value: String)], context: ChannelHandlerContext) {
        readsPaused = true
        let loop = context.eventLoop
        let answer = ClientAnswer(
            bound: NIOLoopBound((handler: self, context: context), eventLoop: loop),
            version: head.version,
            keepAlive: false,
            body: nil
        )
        current = answer
        let exchange = UpgradeExchange(
            proxy: proxy,
            method: head.method.rawValue,
            url: url,
            fields: ForwardingRules.upgradeRequestFields(fields),
            client: answer,
            channel: context.channel
        )
        let (proxy, limit) = (proxy, proxy.configuration.maximumConnections)
        guard proxy.upgradeThreads.add(1, ordering: .relaxed).newValue <= limit else {
            proxy.upgradeThreads.subtract(1, ordering: .relaxed)
            return write(.tooManyUpgrades(limit), answer: answer, context: context)
        }
        guard
            DetachedThread.start({
                exchange.run()
                proxy.upgradeThreads.subtract(1, ordering: .relaxed)
            })
        else {
            proxy.upgradeThreads.subtract(1, ordering: .relaxed)
            return write(.noThread, answer: answer, context: context)
        }
    }

    /// The upstream switched protocols: the 101 goes to the client, and the connection stops
    /// being HTTP. The HTTP handlers leave in swift-nio's own order (HTTPServerUpgradeHandler):
    /// first those that read requests — the decoder hands on what it had read past the request
    /// (`.forwardBytes`, ProxyServer), which HTTPServerPipelineHandler holds and passes to the
    /// ``TunnelHandler`` as it leaves —, then the 101 through the encoder, then the encoder, and
    /// this handler last.
    fileprivate func switchProtocols(fields: [(name: String, value: String)], relay: TunnelRelay, answer: ClientAnswer, context: ChannelHandlerContext) {
        guard current === answer else { return relay.clientClosed() }
        current = nil
        let pipeline = context.pipeline.syncOperations
        func remove<Handler: RemovableChannelHandler>(_ type: Handler.Type) {
            if let handler = try? pipeline.handler(type: type) { pipeline.removeHandler(handler, promise: nil) }
        }
        do {
            try pipeline.addHandler(TunnelHandler(relay: relay), position: .before(self))
        } catch {
            relay.clientClosed()
            return context.close(promise: nil)
        }
        remove(ByteToMessageHandler<HTTPRequestDecoder>.self)
        remove(HTTPServerPipelineHandler.self)
        remove(NIOHTTPResponseHeadersValidator.self)
        remove(HTTPServerProtocolErrorHandler.self)
        var headers = HTTPHeaders()
        for field in fields { headers.add(name: field.name, value: field.value) }
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: answer.version, status: .switchingProtocols, headers: headers))), promise: nil)
        remove(HTTPResponseEncoder.self)
        let channel = context.channel
        pipeline.removeHandler(context: context, promise: nil)
        // This handler held back the channel's reads while the upstream answered: read again.
        channel.read()
    }

    // MARK: Writing, on the event loop, for ClientAnswer

    /// Writes an answer's head (once), a piece of its body and its end, as far as each is
    /// given; `written` is called when the client has taken the body's piece (or never will).
    fileprivate func write(
        head: (status: Int, fields: [(name: String, value: String)])?,
        body: ByteBuffer?,
        ending: Bool,
        answer: ClientAnswer,
        context: ChannelHandlerContext,
        written: @escaping @Sendable () -> Void
    ) {
        guard current === answer else { return written() }
        if let head {
            var headers = HTTPHeaders()
            for field in ForwardingRules.answerFields(head.fields) { headers.add(name: field.name, value: field.value) }
            // HTTP/1.1 has chunked encoding for a body of unknown length (NIO's encoder adds it);
            // HTTP/1.0 has none.
            let unframed = answer.version.minor == 0 && !headers.contains(name: "content-length") && ![204, 304].contains(head.status)
            closesAfterAnswer = !answer.keepAlive || unframed
            if closesAfterAnswer { headers.replaceOrAdd(name: "connection", value: "close") }
            let status = HTTPResponseStatus(statusCode: head.status)
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: answer.version, status: status, headers: headers))), promise: nil)
        }
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { _ in written() }
        if let body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: ending ? nil : promise)
        }
        guard ending else {
            if body == nil || body!.readableBytes == 0 { promise.succeed() }
            context.flush()
            return
        }
        current = nil
        let closes = closesAfterAnswer || !answer.keepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: promise)
        promise.futureResult.whenComplete { _ in
            if closes { channel.close(promise: nil) }
        }
        resumeReading(context: context)
    }

    fileprivate func write(_ own: ProxyAnswer, answer: ClientAnswer, context: ChannelHandlerContext) {
        guard current === answer else { return }
        current = nil
        write(own, keepAlive: answer.keepAlive && (answer.body?.isReplayable ?? true), context: context)
        resumeReading(context: context)
    }

    fileprivate func abort(answer: ClientAnswer, context: ChannelHandlerContext) {
        guard current === answer else { return }
        current = nil
        context.close(promise: nil)
    }

    private func write(_ own: ProxyAnswer, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders(own.fields.map { ($0.name, $0.value) })
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: own.status), headers: headers))),
            promise: nil
        )
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: own.body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    // MARK: Reading, paced by the body's consumer

    func read(context: ChannelHandlerContext) {
        if readsPaused {
            readPending = true
        } else {
            context.read()
        }
    }

    private func resumeReading(context: ChannelHandlerContext) {
        if current == nil { awaitHead(context: context) }
        readsPaused = false
        if readPending {
            readPending = false
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent, current == nil {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        current?.clientGone()
        current = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The way back from an exchange to its client. What the exchange hands it is gathered on the
/// exchanges' thread and passed to the connection's event loop in one hop — a small answer's
/// head, body and end in one — when ``batch`` bytes have gathered, the answer ends, or the
/// exchange has nothing more for now (``flush()``: an answer that comes slowly, a stream of
/// events, reaches the client as it comes). At most ``window`` hops are in flight: past them
/// what comes waits, and once a batch waits a piece is left untaken (``StreamedTake/later``) and
/// the exchange paused until the client has taken a hop, so that a slow reader slows the
/// upstream down instead of filling the proxy's memory (and one that takes nothing for the idle
/// time ends the exchange). Hops leave in the order they were made: each is handed to the event
/// loop under the lock that made it.
final class ClientAnswer: Sendable {
    static let batch = 64 << 10
    /// 256 KiB in flight per answer: a gibibyte moves as fast, and 64 slow readers hold 16 MiB.
    static let window = 4

    fileprivate let bound: NIOLoopBound<(handler: ProxyConnectionHandler, context: ChannelHandlerContext)>
    let version: HTTPVersion
    let keepAlive: Bool
    let body: RequestBody?
    private let gone = Atomic<Bool>(false)
    /// What waits for the next hop, and the batches the client may still be sent.
    private let pending = Mutex(Pending())

    private struct Pending: Sendable {
        var head: (status: Int, fields: [(name: String, value: String)])?
        var body: ByteBuffer?
        var credits = ClientAnswer.window
        /// Resumes the exchange paused for a credit.
        var wake: (@Sendable () -> Void)?
        /// The upstream exchange under way, ended when the client goes (``clientGone()``).
        var exchange: StreamedExchange?

        /// A head or some body waits to go.
        var hasSome: Bool { head != nil || (body?.readableBytes ?? 0) > 0 }
    }

    fileprivate init(
        bound: NIOLoopBound<(handler: ProxyConnectionHandler, context: ChannelHandlerContext)>,
        version: HTTPVersion,
        keepAlive: Bool,
        body: RequestBody?
    ) {
        self.bound = bound
        self.version = version
        self.keepAlive = keepAlive
        self.body = body
    }

    private var eventLoop: any EventLoop { bound.eventLoop }

    /// Whether the client has gone away.
    var isGone: Bool { gone.load(ordering: .relaxed) }

    /// The upstream's answer head, its fields as received: the client gets
    /// ``ForwardingRules/answerFields(_:)`` of them (filtered on the event loop).
    func head(status: Int, fields: [(name: String, value: String)]) {
        pending.withLock { $0.head = (status, fields) }
    }

    /// Adds a piece of the body, unless a whole batch waits for a credit already: then the
    /// piece is left and `wake` called once the client has taken a hop. `.abort` when the
    /// client is gone.
    func body(_ bytes: UnsafeRawBufferPointer, whenTaken wake: @escaping @Sendable () -> Void) -> StreamedTake {
        guard !isGone else { return .abort }
        return pending.withLock { pending -> StreamedTake in
            if let waiting = pending.body, waiting.readableBytes >= Self.batch, pending.credits == 0 {
                pending.wake = wake
                return .later
            }
            if pending.body == nil { pending.body = ByteBufferAllocator().buffer(capacity: max(bytes.count, 16 << 10)) }
            pending.body!.writeBytes(bytes)
            if pending.body!.readableBytes >= Self.batch { sendOnCredit(&pending) }
            return .taken
        }
    }

    /// What has gathered goes now, if a credit allows; otherwise it goes as a credit comes back.
    func flush() {
        pending.withLock { sendOnCredit(&$0) }
    }

    /// ``body(_:whenTaken:)`` for a thread that may wait (a tunnel's): waits for the client to
    /// take a hop, at most `idleSeconds`; `false` when the client is gone or took nothing. What
    /// it added goes at once (``flush()``).
    func bodyWaiting(_ bytes: UnsafeRawBufferPointer, idleSeconds: Int) -> Bool {
        let taken = DispatchSemaphore(value: 0)
        while true {
            switch body(bytes, whenTaken: { taken.signal() }) {
            case .taken:
                flush()
                return true
            case .abort: return false
            case .later:
                guard taken.wait(timeout: .now() + .seconds(idleSeconds)) == .success else { return false }
            }
        }
    }

    /// The answer is complete: what waits goes with its end, credit or not.
    func end() {
        pending.withLock { send(Self.hop(&$0, ending: true)) }
    }

    private typealias Hop = (head: (status: Int, fields: [(name: String, value: String)])?, body: ByteBuffer?, ending: Bool)

    private static func hop(_ pending: inout Pending, ending: Bool) -> Hop {
        defer { (pending.head, pending.body) = (nil, nil) }
        return (pending.head, pending.body, ending)
    }

    /// Under `pending`'s lock: what has gathered goes, using a credit, if there is any and a
    /// credit is left.
    private func sendOnCredit(_ pending: inout Pending) {
        guard pending.hasSome, pending.credits > 0 else { return }
        pending.credits -= 1
        send(Self.hop(&pending, ending: false))
    }

    /// Passes a hop to the event loop (called under `pending`'s lock, which keeps hops in order);
    /// the client's taking it gives a credit back.
    private func send(_ hop: Hop) {
        let bound = bound
        eventLoop.execute {
            bound.value.handler.write(head: hop.head, body: hop.body, ending: hop.ending, answer: self, context: bound.value.context) {
                self.credited()
            }
        }
    }

    /// A hop was taken: the exchange paused for a batch goes on, or what gathered meanwhile
    /// (flushed while no credit was left) goes now.
    private func credited() {
        let wake = pending.withLock { pending -> (@Sendable () -> Void)? in
            pending.credits += 1
            if let wake = pending.wake {
                pending.wake = nil
                return wake
            }
            sendOnCredit(&pending)
            return nil
        }
        wake?()
    }

    /// Answers with the proxy's own answer (nothing of the upstream's was sent).
    func answer(_ own: ProxyAnswer) {
        let bound = bound
        eventLoop.execute { bound.value.handler.write(own, answer: self, context: bound.value.context) }
    }

    /// The upstream said 101: the connection becomes the tunnel `relay` serves.
    func switchProtocols(fields: [(name: String, value: String)], relay: TunnelRelay) {
        let bound = bound
        eventLoop.execute { bound.value.handler.switchProtocols(fields: fields, relay: relay, answer: self, context: bound.value.context) }
    }

    /// Closes the connection: the answer broke after its head was sent.
    func abort() {
        let bound = bound
        eventLoop.execute { bound.value.handler.abort(answer: self, context: bound.value.context) }
    }

    /// The upstream exchange now under way for this answer (the first, or a retry's): ended at
    /// once when the client has gone or goes.
    func exchangeStarted(_ exchange: StreamedExchange) {
        let cancel = pending.withLock { pending -> Bool in
            pending.exchange = exchange
            return isGone
        }
        if cancel { exchange.cancel() }
    }

    /// On the event loop: the connection closed. The upstream exchange ends now — it would
    /// otherwise hold its upstream connection until the upstream's head came or the idle time
    /// passed, outside any limit of the proxy's connections —, and a paused one is woken to
    /// hear it.
    fileprivate func clientGone() {
        gone.store(true, ordering: .relaxed)
        body?.fail()
        let (wake, exchange) = pending.withLock { pending in
            defer { pending.wake = nil }
            return (pending.wake, pending.exchange)
        }
        exchange?.cancel()
        wake?()
    }
}
