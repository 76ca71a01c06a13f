import NIOCore

/// Closes connections that stall, so that a slow or idle client costs a descriptor for a
/// bounded time and never delays anyone (each connection is served on its own anyway).
///
/// What is due when is ``DeadlineState``'s decision (the deadlines are listed there); this
/// handler counts lines and answers as they pass through it, tells the state, and runs the
/// three timers it asks for on the connection's event loop (`EmbeddedEventLoop`'s clock in
/// `ConnectionHandlerTests`), and a fourth of its own while the client leaves its answers
/// unread (``ConnectionDeadline/unread``).
final class ConnectionDeadlines: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let limits: ConnectionLimits
    private let onTimeout: @Sendable (String) -> Void
    private var state: DeadlineState
    private var requestTimer: Scheduled<Void>?
    private var firstByteTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    /// Runs while the client leaves its answers unread (``ConnectionDeadline/unread``).
    private var unreadTimer: Scheduled<Void>?

    /// - Parameters:
    ///   - bytesArrived: A byte arrived already (before ``FrontDoor`` handed the connection on):
    ///     no first-byte deadline.
    ///   - onTimeout: Told which deadline closed the connection (for the log).
    init(limits: ConnectionLimits, bytesArrived: Bool = false, onTimeout: @escaping @Sendable (String) -> Void) {
        self.limits = limits
        self.onTimeout = onTimeout
        state = DeadlineState(limits: limits, bytesArrived: bytesArrived)
    }

    func channelActive(context: ChannelHandlerContext) {
        started(context)
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { started(context) }
    }

    private func started(_ context: ChannelHandlerContext) {
        apply(state.started(now: context.eventLoop.now), context)
        if firstByteTimer == nil, state.needsFirstByteClock {
            firstByteTimer = schedule(context, .firstByte)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data).readableBytesView
        guard let last = bytes.last else { return context.fireChannelRead(data) }
        let finishedLines = bytes.count { $0 == UInt8(ascii: "\n") }
        apply(state.bytesRead(finishedLines: finishedLines, last: last, now: context.eventLoop.now), context)
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        apply(state.readRequested(), context)
        context.read()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed {
            apply(state.inputEnded(now: context.eventLoop.now), context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        apply(state.answerWritten(now: context.eventLoop.now), context)
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        requestTimer?.cancel()
        firstByteTimer?.cancel()
        idleTimer?.cancel()
        unreadTimer?.cancel()
        context.fireChannelInactive()
    }

    /// A client that stops reading its answers (lines pipelined behind them keep the
    /// connection from ever counting as idle) is closed once it has read nothing for the idle
    /// time; any progress starts the clock again.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            unreadTimer?.cancel()
            unreadTimer = nil
        } else if unreadTimer == nil {
            unreadTimer = schedule(context, .unread)
        }
        context.fireChannelWritabilityChanged()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if event is WatchStarted {
            state.watchStarted()
            promise?.succeed()
            return
        }
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    /// Runs the timers the state asked for.
    private func apply(_ actions: DeadlineState.Actions, _ context: ChannelHandlerContext) {
        if actions.stopFirstByteClock {
            firstByteTimer?.cancel()
            firstByteTimer = nil
        }
        switch actions.requestClock {
        case true?:
            requestTimer = schedule(context, .request)
        case false?:
            requestTimer?.cancel()
            requestTimer = nil
        case nil:
            break
        }
        if let at = actions.idleCheckAt { scheduleIdleCheck(context, at: at) }
    }

    private func scheduleIdleCheck(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (self_, context) = handler.value
            self_.idleTimer = nil
            switch self_.state.idleCheckFired(now: context.eventLoop.now) {
            case .busy:
                break
            case .checkAgain(let at):
                self_.scheduleIdleCheck(context, at: at)
            case .close:
                self_.onTimeout(ConnectionDeadline.idle.reason(self_.limits))
                context.channel.close(promise: nil)
            }
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
