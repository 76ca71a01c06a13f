import AuthGateClient
import AuthGateCore
import AuthGateHTTP
import CLinux
import FoundationEssentials
import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A protocol upgrade (WebSocket), on a thread of its own (the tunnel's): the request goes to
/// the upstream on a connection of its own (``UpstreamConnection``: libcurl connects, the head
/// is written here) with the session's headers, as ``ProxyExchange``'s requests do, and under
/// the same retry rule (a 401 refusing the token or asking for a DPoP nonce is sent once more).
/// A `101` is passed to the client, whose connection then stops being HTTP, and from then on
/// bytes are relayed both ways (``TunnelRelay``) until either side closes, the proxy stops, or
/// no byte has moved for the idle time. Any other answer reaches the client as it came, and the
/// connection closes after it.
final class UpgradeExchange: Sendable {
    private let proxy: ProxyCore
    private let method: String
    private let url: URL
    private let fields: [(name: String, value: String)]
    private let client: ClientAnswer
    private let channel: any Channel

    init(proxy: ProxyCore, method: String, url: URL, fields: [(name: String, value: String)], client: ClientAnswer, channel: any Channel) {
        self.proxy = proxy
        self.method = method
        self.url = url
        self.fields = fields
        self.client = client
        self.channel = channel
    }

    func run() {
        var authorized: AuthorizedRequest
        let (proxy, method, url) = (proxy, method, url)
        switch waitFor({ await proxy.authorize(method: method, url: url) }) {
        case .authorized(let value): authorized = value
        case .refused(let answer): return client.answer(answer)
        }
        while true {
            let request = StreamedRequest(method: method, url: url, headers: fields + authorized.headers, bodyLength: nil)
            let connection: UpstreamConnection
            do {
                connection = try UpstreamConnection(upgrading: request, policy: proxy.streamPolicy)
            } catch {
                guard !client.isGone else { return }
                proxy.upstreamFailed(error)
                return client.answer(.upstreamFailed(error))
            }
            if connection.status == 101 {
                proxy.answered(status: 101)
                return relay(connection)
            }
            if let decision = proxy.retryDecision(status: connection.status, fields: connection.headers, authorized: authorized),
                let next = waitFor({ [authorized] in await proxy.retry(authorized, as: decision) })
            {
                proxy.retried(nonce: next.nonceRetried && !authorized.nonceRetried)
                if next.tokenRetried && !authorized.tokenRetried { proxy.tookNew(next.token) }
                authorized = next
                continue
            }
            // Refused (or answered otherwise): the answer as it came, then the connection closes.
            proxy.answered(status: connection.status)
            client.head(status: connection.status, fields: connection.headers)
            do {
                try connection.readBody { client.bodyWaiting($0, idleSeconds: proxy.configuration.idleSeconds) }
            } catch {
                return client.abort()
            }
            return client.end()
        }
    }

    /// Switches the client's connection to the tunnel and relays bytes both ways until it ends.
    private func relay(_ connection: UpstreamConnection) {
        guard let relay = TunnelRelay(channel: channel) else {
            proxy.logger.warning("cannot open a tunnel: no eventfd", metadata: ["error": "\(String(cString: strerror(errno)))"])
            return client.abort()
        }
        proxy.counts.withLock { $0.upgrades += 1 }
        let upgrade = connection.headers.first { $0.name.lowercased() == "upgrade" }?.value ?? ""
        proxy.logger.info("protocol upgrade: tunnel open", metadata: ["proxy.upgrade": "\(upgrade)"])
        client.switchProtocols(fields: ForwardingRules.upgradeAnswerFields(connection.headers), relay: relay)
        let outcome = relay.run(connection, idleSeconds: proxy.configuration.idleSeconds, stop: proxy.tunnelStop)
        proxy.logger.info(
            "tunnel closed: \(outcome.reason)",
            metadata: ["proxy.bytes_up": "\(outcome.bytesUp)", "proxy.bytes_down": "\(outcome.bytesDown)"]
        )
    }
}

/// The proxy's stop, for its tunnels: an eventfd each tunnel's thread polls, which becomes
/// readable for good when the proxy stops (nothing reads it back).
final class TunnelStop: Sendable {
    let descriptor: Int32

    init() {
        descriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }

    func stop() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    deinit { if descriptor >= 0 { close(descriptor) } }
}

/// One tunnel's bytes between the client's connection (its event loop pushes what it reads,
/// ``TunnelHandler``) and the exchange's thread (which sends them upstream, and writes what the
/// upstream sends to the client). Each way is bounded: past ``highWater`` bytes from the client
/// the connection stops reading until the thread has taken them below ``lowWater``; at most
/// ``window`` pieces of ``piece`` bytes go to the client before it has taken them. The thread
/// waits for both ways at once: poll(2) on the upstream's socket and an eventfd the event loop
/// signals when client bytes are queued, the client has taken a piece, or it has gone.
final class TunnelRelay: Sendable {
    static let highWater = 256 << 10
    static let lowWater = 64 << 10
    static let piece = 64 << 10
    /// 256 KiB towards the client, as an answer's body has (``ClientAnswer``).
    static let window = 4

    let channel: any Channel
    private let wake: Int32
    private let state = Mutex(Queue())
    private let inFlight = Atomic<Int>(0)

    private struct Queue: Sendable {
        var bytes = ByteQueue()
        var paused = false
        var clientClosed = false
    }

    /// Why a tunnel ended, and what it moved.
    struct Outcome: Sendable {
        var reason: String
        var bytesUp = 0
        var bytesDown = 0
    }

    init?(channel: any Channel) {
        wake = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wake >= 0 else { return nil }
        self.channel = channel
    }

    deinit { close(wake) }

    private func signal() {
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    // MARK: On the event loop

    /// Adds what the client sent. Returns whether the connection should stop reading.
    func push(_ buffer: ByteBuffer) -> Bool {
        let pause = state.withLock { queue in
            queue.bytes.append(buffer)
            if queue.bytes.count > Self.highWater { queue.paused = true }
            return queue.paused
        }
        signal()
        return pause
    }

    /// The client's connection closed (or never became a tunnel).
    func clientClosed() {
        state.withLock { $0.clientClosed = true }
        signal()
    }

    // MARK: On the exchange's thread

    /// The next bytes for the upstream, and whether the client has closed (after them).
    private func take() -> (ByteBuffer?, closed: Bool) {
        let (chunk, closed, resumes) = state.withLock { queue in
            guard let chunk = queue.bytes.popFirst() else { return (nil as ByteBuffer?, queue.clientClosed, false) }
            let resumes = queue.paused && queue.bytes.count < Self.lowWater
            if resumes { queue.paused = false }
            return (chunk, false, resumes)
        }
        if resumes {
            let channel = channel
            channel.eventLoop.execute {
                (try? channel.pipeline.syncOperations.handler(type: TunnelHandler.self))?.resumeReading()
            }
        }
        return (chunk, closed)
    }

    /// Passes bytes from the upstream to the client, using up a piece of the window.
    private func toClient(_ bytes: UnsafeRawBufferPointer) {
        inFlight.add(1, ordering: .relaxed)
        let buffer = channel.allocator.buffer(bytes: bytes)
        let channel = channel
        channel.eventLoop.execute {
            channel.writeAndFlush(buffer).whenComplete { _ in
                self.inFlight.subtract(1, ordering: .relaxed)
                self.signal()
            }
        }
    }

    /// Closes the client's connection once what was written to it has gone.
    private func closeClient() {
        let channel = channel
        channel.eventLoop.execute {
            channel.writeAndFlush(channel.allocator.buffer(capacity: 0)).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// Relays until either side closes, `stop` is signalled, or nothing moved for `idleSeconds`;
    /// then closes both sides.
    func run(_ connection: UpstreamConnection, idleSeconds: Int, stop: TunnelStop) -> Outcome {
        var outcome = Outcome(reason: "")
        var scratch = [UInt8](repeating: 0, count: Self.piece)
        var outgoing: ByteBuffer?
        // Bytes may have come with the 101, or wait in TLS: receive before the first poll.
        var upstreamReadable = true
        var lastMoved = ContinuousClock.now
        let idle = Duration.seconds(idleSeconds)
        defer { closeClient() }
        while true {
            // Client → upstream, until the socket takes no more.
            sending: while true {
                if outgoing == nil {
                    let (chunk, closed) = take()
                    if closed {
                        outcome.reason = "the client closed"
                        return outcome
                    }
                    outgoing = chunk
                }
                guard var chunk = outgoing else { break sending }
                switch chunk.withUnsafeReadableBytes({ connection.send($0) }) {
                case .moved(let count):
                    chunk.moveReaderIndex(forwardBy: count)
                    outgoing = chunk.readableBytes > 0 ? chunk : nil
                    outcome.bytesUp += count
                    lastMoved = .now
                case .wouldBlock:
                    break sending
                case .closed, .failed:
                    outcome.reason = "the upstream's connection broke"
                    return outcome
                }
            }
            // Upstream → client, while the client has room.
            receiving: while upstreamReadable && inFlight.load(ordering: .relaxed) < Self.window {
                switch scratch.withUnsafeMutableBytes({ connection.receive(into: $0) }) {
                case .moved(let count):
                    scratch.withUnsafeBytes { toClient(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
                    outcome.bytesDown += count
                    lastMoved = .now
                case .wouldBlock:
                    upstreamReadable = false
                case .closed:
                    outcome.reason = "the upstream closed"
                    return outcome
                case .failed:
                    outcome.reason = "the upstream's connection broke"
                    return outcome
                }
            }
            // Wait for either way, the proxy's stop, or the idle time's end.
            var events: Int16 = 0
            if !upstreamReadable && inFlight.load(ordering: .relaxed) < Self.window { events |= Int16(POLLIN) }
            if outgoing != nil { events |= Int16(POLLOUT) }
            // A socket watched for nothing is left out (-1): poll reports a hang-up whatever is
            // asked, and a closed upstream would wake it at once, again and again, while the
            // client's window is full.
            var watched = [
                pollfd(fd: events == 0 ? -1 : connection.socket, events: events, revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stop.descriptor, events: Int16(POLLIN), revents: 0),
            ]
            let left = idle - (ContinuousClock.now - lastMoved)
            guard left > .zero else {
                outcome.reason = "no byte moved for \(idleSeconds) s"
                return outcome
            }
            let ready = poll(&watched, 3, Int32(min((left / .milliseconds(1)).rounded(.up), Double(Int32.max))))
            if ready < 0 && errno != EINTR {
                outcome.reason = "poll failed"
                return outcome
            }
            if watched[2].revents != 0 {
                outcome.reason = "the proxy stopped"
                return outcome
            }
            if watched[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wake, &count, 8)
            }
            if watched[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { upstreamReadable = true }
        }
    }
}

/// The client's side of a tunnel, in place of the HTTP handlers once the upstream said 101:
/// raw bytes to the ``TunnelRelay``, reading paused while it holds too many; the connection
/// closes after the idle time with no byte either way (``IdleStateHandler``), and its close
/// ends the tunnel.
final class TunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let relay: TunnelRelay
    private var readsPaused = false
    private var readPending = false
    private var context: ChannelHandlerContext?

    init(relay: TunnelRelay) {
        self.relay = relay
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard buffer.readableBytes > 0 else { return }
        if relay.push(buffer) { readsPaused = true }
    }

    func read(context: ChannelHandlerContext) {
        if readsPaused {
            readPending = true
        } else {
            context.read()
        }
    }

    /// On the event loop: the relay took the client's bytes below its low water.
    func resumeReading() {
        readsPaused = false
        if readPending, let context {
            readPending = false
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        relay.clientClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
