import NIOCore

/// Closes connections that stall, so that a slow or idle client costs a descriptor for a
/// bounded time and never delays anyone (each connection is served on its own anyway).
///
/// - No byte within `firstByteTimeout` of the connection's start: closed.
/// - A request line not finished within `requestTimeout` of its first byte: closed. The clock
///   is not reset by more bytes, so dripping one byte a second does not keep it open; it does
///   not run while the server holds reads behind a request in flight.
/// - No partial line and no request waiting for its answer for `idleTimeout`: closed. A
///   request in progress (a slow provider, say) never counts as idle.
///
/// Requests are counted by their newlines and answers by their writes: the server writes one
/// buffer (possibly empty) for every line, notifications and blank lines included.
final class ConnectionDeadlines: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let limits: ConnectionLimits
    private let onTimeout: @Sendable (String) -> Void
    private var partialLine = false
    private var unanswered = 0
    private var requestTimer: Scheduled<Void>?
    private var firstByteTimer: Scheduled<Void>?
    /// The connection carries a `token.watch`: quiet by nature, never closed for idling.
    private var watching = false
    private var anyByteArrived = false
    /// Since when nothing is in progress; `nil` while a line or an answer is.
    private var idleSince: NIODeadline?
    /// At most one at a time; it checks `idleSince` when it fires rather than being cancelled and
    /// scheduled again on every line and every answer, which cost two timer cancellations and two
    /// schedulings per request.
    private var idleTimer: Scheduled<Void>?

    /// - Parameters:
    ///   - bytesArrived: A byte arrived already (before ``FrontDoor`` handed the connection on):
    ///     no first-byte deadline.
    ///   - onTimeout: Told which deadline closed the connection (for the log).
    init(limits: ConnectionLimits, bytesArrived: Bool = false, onTimeout: @escaping @Sendable (String) -> Void) {
        self.limits = limits
        self.onTimeout = onTimeout
        anyByteArrived = bytesArrived
    }

    func channelActive(context: ChannelHandlerContext) {
        started(context)
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { started(context) }
    }

    private func started(_ context: ChannelHandlerContext) {
        rearmIdle(context)
        if firstByteTimer == nil, !anyByteArrived {
            firstByteTimer = schedule(context, .firstByte)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data).readableBytesView
        guard let last = bytes.last else { return context.fireChannelRead(data) }
        if !anyByteArrived {
            anyByteArrived = true
            firstByteTimer?.cancel()
            firstByteTimer = nil
        }
        let finishedLines = bytes.count { $0 == UInt8(ascii: "\n") }
        unanswered += finishedLines
        partialLine = last != UInt8(ascii: "\n")
        // A finished line stops its clock; the next partial line starts its own.
        if finishedLines > 0 || !partialLine {
            requestTimer?.cancel()
            requestTimer = nil
        }
        rearmIdle(context)
        context.fireChannelRead(data)
    }

    /// The request clock runs while the server reads: it starts when the server asks for more
    /// of an unfinished line, not while the server holds reads (a request in flight ahead of
    /// it), which is no delay of the client's.
    func read(context: ChannelHandlerContext) {
        if partialLine, requestTimer == nil {
            requestTimer = schedule(context, .request)
        }
        context.read()
    }

    /// At the end of input an unfinished last line counts as a request (`printf '{…}' | nc -N`).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed, partialLine {
            partialLine = false
            unanswered += 1
            requestTimer?.cancel()
            requestTimer = nil
            rearmIdle(context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        unanswered = max(0, unanswered - 1)
        rearmIdle(context)
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        firstByteTimer?.cancel()
        idleTimer?.cancel()
        context.fireChannelInactive()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if event is WatchStarted {
            watching = true
            idleSince = nil
            promise?.succeed()
            return
        }
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    /// Starts the idle clock when the connection is idle now, and stops it otherwise.
    private func rearmIdle(_ context: ChannelHandlerContext) {
        guard unanswered == 0, !partialLine, !watching else {
            idleSince = nil
            return
        }
        // The loop's clock: the real one on a real loop, a test's on an EmbeddedEventLoop.
        let now = context.eventLoop.now
        idleSince = now
        if idleTimer == nil { scheduleIdleCheck(context, at: now + TimeAmount(ConnectionDeadline.idle.duration(limits))) }
    }

    private func scheduleIdleCheck(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (self_, context) = handler.value
            self_.idleTimer = nil
            // Busy now: the next idle moment schedules a check again.
            guard let since = self_.idleSince else { return }
            let closeAt = since + TimeAmount(self_.limits.idleTimeout)
            guard context.eventLoop.now >= closeAt else { return self_.scheduleIdleCheck(context, at: closeAt) }
            self_.onTimeout(ConnectionDeadline.idle.reason(self_.limits))
            context.channel.close(promise: nil)
        }
    }

    private func schedule(_ context: ChannelHandlerContext, _ deadline: ConnectionDeadline) -> Scheduled<Void> {
        let channel = context.channel
        let onTimeout = onTimeout
        let reason = deadline.reason(limits)
        return context.eventLoop.scheduleTask(in: TimeAmount(deadline.duration(limits))) {
            onTimeout(reason)
            channel.close(promise: nil)
        }
    }
}
