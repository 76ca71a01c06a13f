public import AuthGateClient
import AuthGateCore
import AuthGateHTTP
import AuthGateRPC
import AuthGateServer
import CLinux
import Dispatch
import FoundationEssentials
public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `authgate proxy`: a local reverse proxy that sends every request it is given to one
/// upstream origin with the session's token (and, for a DPoP session, a proof per request).
///
/// Who may use it is checked as each connection is accepted (``ProxyListener``,
/// ``CallerCheck``); what it forwards is ``ForwardingRules``'; each request's way through is
/// ``ProxyConnectionHandler`` (client side, NIO's HTTP/1 codec) and ``ProxyExchange``
/// (upstream side: libcurl's multi interface on one thread for every exchange, ``StreamedExchanges``).
public final class ProxyServer: Sendable {
    let core: ProxyCore
    private let listener: ProxyListener
    /// `--metrics-listen`'s socket: the counts for Prometheus, to the same callers.
    private let metricsListener: ProxyListener?
    /// The two accept loops and the session's follower.
    private let ownThreads = NIOThreadPool(numberOfThreads: 3)
    /// Refused connections still being answered (each for up to 2 s); past ``refusalsAnswered``
    /// a refused connection is closed at once, so that a user the proxy refuses cannot hold its
    /// descriptors by opening connections and leaving them open.
    private let refusing = Atomic<Int>(0)
    static let refusalsAnswered = 32
    /// When a refused caller was last logged (ContinuousClock), and how many went unlogged since.
    private let refusalLog = Mutex<(last: ContinuousClock.Instant?, unlogged: Int)>((nil, 0))

    /// Binds the listening socket.
    /// - Throws: ``ProxyConfigurationError`` when it cannot listen where asked.
    public init(configuration: ProxyConfiguration, client: AuthGateClient, logger: Logger) throws(ProxyConfigurationError) {
        if !configuration.listen.isLocal && !configuration.allowsRemoteCallers {
            throw ProxyConfigurationError(
                "\(configuration.listen) is not a loopback address: other machines could use the session. Pass --allow-remote-callers if that is what you want"
            )
        }
        listener = try ProxyListener(configuration.listen, socketGroup: configuration.socketGroup)
        if let metrics = configuration.metricsListen {
            guard metrics.isLocal || configuration.allowsRemoteCallers else {
                throw ProxyConfigurationError("--metrics-listen \(metrics) is not a loopback address")
            }
            metricsListener = try ProxyListener(metrics, socketGroup: configuration.socketGroup)
        } else {
            metricsListener = nil
        }
        core = ProxyCore(configuration: configuration, client: client, logger: logger)
    }

    /// Where it listens (with the port the kernel chose for port 0).
    public var address: ListenAddress { listener.address }

    /// Where it serves its metrics, if it does.
    public var metricsAddress: ListenAddress? { metricsListener?.address }

    /// What it has done so far.
    public var counts: ProxyCounts { core.counts.withLock { $0 } }

    /// Accepts connections on a thread of its own until ``stop()``; first warns, in the log,
    /// when other machines can reach the address.
    public func start() {
        if !core.configuration.listen.isLocal {
            core.logger.warning("listening on an address other machines can reach: any of them can use the session")
        }
        ownThreads.start()
        ownThreads.submit { _ in self.core.follow() }
        ownThreads.submit { _ in self.listener.run({ self.admit($0, on: self.listener) }, failed: self.acceptFailed) }
        if let metricsListener {
            ownThreads.submit { _ in metricsListener.run({ self.admit($0, on: metricsListener) }, failed: self.acceptFailed) }
        }
        core.logger.notice(
            "authgate proxy listening",
            metadata: [
                "proxy.listen": "\(listener.address)", "proxy.upstream": "\(core.configuration.upstream)", "provider.id": "\(core.configuration.provider)",
            ]
        )
    }

    private func acceptFailed(_ error: Int32) {
        core.logger.error("cannot accept a connection; trying again in a second", metadata: ["error": "\(String(cString: strerror(error)))"])
    }

    /// Stops accepting and closes the tunnels (upgraded connections, which may never end);
    /// requests under way go on until they end or the process exits.
    public func stop() {
        listener.stop()
        metricsListener?.stop()
        core.stopFollowing()
        core.tunnelStop.stop()
    }

    /// Serves until SIGTERM, SIGINT or SIGQUIT is read from `signals` (the process's signal descriptor,
    /// `ag_supervisor_signals`: the signals are the process's, blocked before any thread
    /// exists) or it cannot be read, other signals are read and ignored; then ``stop()``s and
    /// logs what it did.
    public func serve(untilStoppedBy signals: Int32) {
        while true {
            let signal = ag_read_signal(signals, nil)
            if [SIGTERM, SIGINT, SIGQUIT].contains(signal) || (signal < 0 && errno != EINTR) { break }
        }
        stop()
        let counts = counts
        core.logger.notice(
            "authgate proxy stopped",
            metadata: [
                "proxy.requests": "\(counts.requests)",
                "proxy.answers": "\(counts.upstreamAnswers)",
                "proxy.retries": "nonce=\(counts.nonceRetries) token=\(counts.tokenRetries)",
                "proxy.callers_refused": "\(counts.callersRefused)",
            ]
        )
    }

    /// Checks a new connection's caller, then serves it with NIO or refuses it.
    private func admit(_ descriptor: Int32, on listener: ProxyListener) {
        let configuration = core.configuration
        var uid: UInt32?
        let checked: Bool
        let servesMetrics = listener !== self.listener
        switch listener.address {
        case .unix:
            uid = CallerCheck.unixPeerUID(descriptor)
            checked = true
        case .tcp:
            if configuration.allowsRemoteCallers, let peer = SocketEnd.peer(of: descriptor), !peer.address.isLoopback {
                checked = false
            } else {
                uid = CallerCheck.tcpPeerUID(descriptor)
                checked = true
            }
        }
        if checked {
            guard let uid, uid == geteuid() || configuration.allowedUIDs.contains(uid) else {
                core.counts.withLock { $0.callersRefused += 1 }
                logRefusal(uid)
                refuse(descriptor, ProxyAnswer.callerRefused(uid: uid))
                return
            }
        }
        guard core.shares.take(uid) else {
            core.refused(.tooManyConnections)
            refuse(descriptor, .tooManyConnections)
            return
        }
        let core = core
        let caller = uid
        let idle = TimeAmount.seconds(Int64(configuration.idleSeconds))
        ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    channel.closeFuture.whenComplete { _ in core.connectionClosed(caller) }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(IdleStateHandler(allTimeout: idle))
                    // An upgrade configuration without upgraders: NIO's handler for it lets every
                    // request through (and leaves after the first), but the request decoder then
                    // hands on what it read past an upgrade request when it is removed
                    // (`.forwardBytes`), which a tunnel's first bytes may be (ProxyTunnel.swift).
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: true, withServerUpgrade: ([], { _ in }), withErrorHandling: true)
                    if servesMetrics {
                        try sync.addHandler(MetricsHandler(core: core))
                    } else {
                        try sync.addHandler(ProxyConnectionHandler(proxy: core, caller: caller))
                    }
                }
            }
            .withConnectedSocket(descriptor)
            .whenFailure { error in
                core.connectionClosed(caller)
                core.logger.warning("cannot serve a connection", metadata: ["error": "\(error)"])
            }
    }

    /// Answers a refused connection with `answer` on an event loop and closes it: the answer
    /// written, the output half-closed, what the client sent read and dropped until it closes
    /// too (closing with unread bytes would reset the connection and lose the answer), at most
    /// 2 s. Nothing it sends is parsed or forwarded, and the accept thread never waits for it.
    /// Past ``refusalsAnswered`` being answered, the connection is closed at once instead.
    private func refuse(_ descriptor: Int32, _ answer: ProxyAnswer) {
        guard refusing.wrappingAdd(1, ordering: .relaxed).newValue <= Self.refusalsAnswered else {
            refusing.wrappingSubtract(1, ordering: .relaxed)
            close(descriptor)
            return
        }
        let bytes = answer.closingBytes
        ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    channel.closeFuture.whenComplete { _ in self.refusing.wrappingSubtract(1, ordering: .relaxed) }
                    try channel.pipeline.syncOperations.addHandler(RefusalHandler(bytes: bytes))
                }
            }
            .withConnectedSocket(descriptor)
            .whenFailure { _ in
                self.refusing.wrappingSubtract(1, ordering: .relaxed)
                close(descriptor)
            }
    }

    /// Logs a refused caller, at most once a second (with how many more were refused since),
    /// so that a user opening connections in a loop cannot flood the log.
    private func logRefusal(_ uid: UInt32?) {
        let now = ContinuousClock.now
        let unlogged = refusalLog.withLock { log -> Int? in
            if let last = log.last, now - last < .seconds(1) {
                log.unlogged += 1
                return nil
            }
            defer { log = (now, 0) }
            return log.unlogged
        }
        guard let unlogged else { return }
        var metadata: Logger.Metadata = ["peer.uid": "\(uid.map(String.init) ?? "unknown")"]
        if unlogged > 0 { metadata["proxy.refused_unlogged"] = "\(unlogged)" }
        core.logger.warning("connection refused: not the proxy's user", metadata: metadata)
    }
}

/// Writes a refusal to a new connection and closes it once the client has closed its side.
private final class RefusalHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let bytes: [UInt8]

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(NIOAny(channel.allocator.buffer(bytes: bytes))).whenComplete { _ in
            channel.close(mode: .output, promise: nil)
        }
        context.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// What every connection and exchange of one proxy shares.
final class ProxyCore: Sendable {
    let configuration: ProxyConfiguration
    let authorizer: HTTPAuthorizer
    let streams: StreamedExchanges
    let streamPolicy: StreamPolicy
    let logger: Logger
    let counts = Mutex(ProxyCounts())
    /// Client connections open now, in all and by uid.
    let shares: ConnectionShares
    /// The session's token as the daemon last pushed it (`token.watch`, ``TokenFollower``):
    /// requests take it without a call, until it nears its expiry or the session ends.
    private let followed = Mutex<TokenResult?>(nil)
    private let following = FollowStop()
    let upstreamOrigin: HTTPOrigin?
    private let socketPath: String
    /// Signalled when the proxy stops: every tunnel's thread polls it.
    let tunnelStop = TunnelStop()
    /// Upgrade threads alive (waiting for the upstream's answer, or relaying a tunnel): at most
    /// `--max-connections`. A thread waiting for the upstream cannot be interrupted, and outlives
    /// a client that leaves meanwhile (for up to the connect and idle times), so the connection
    /// limit alone does not bound them.
    let upgradeThreads = Atomic<Int>(0)

    init(configuration: ProxyConfiguration, client: AuthGateClient, logger: Logger) {
        self.configuration = configuration
        authorizer = HTTPAuthorizer(
            client: client,
            provider: configuration.provider,
            session: configuration.session,
            minimumValidity: configuration.minimumValidity,
            variant: configuration.variant
        )
        streams = StreamedExchanges(connectionsKept: configuration.maximumConnections)
        streamPolicy = StreamPolicy(caBundle: configuration.caBundle, idleTimeoutSeconds: configuration.idleSeconds, allowInsecureLoopback: true)
        self.logger = logger
        shares = ConnectionShares(
            total: configuration.maximumConnections,
            perUID: configuration.allowedUIDs.isEmpty ? configuration.maximumConnections : max(1, configuration.maximumConnections / 2)
        )
        socketPath = client.socketPath
        upstreamOrigin = HTTPOrigin(url: configuration.upstream.origin)
    }

    /// Follows the session's token until ``stopFollowing()``, on the calling thread. A proxy
    /// sending a variant (``ProxyConfiguration/variant``) follows nothing: those are asked for.
    func follow() {
        guard configuration.variant == nil else { return }
        let follower = TokenFollower(
            socketPath: socketPath,
            params: TokenParams(provider: configuration.provider, session: configuration.session, minValidSeconds: configuration.minimumValidity)
        )
        do throws(RPCClientError) {
            try follower.run(stop: following) { event in
                switch event {
                case .token(let token): followed.withLock { $0 = token }
                case .ended, .unavailable: followed.withLock { $0 = nil }
                }
                return true
            }
        } catch {
            followed.withLock { $0 = nil }
            logger.info("requests ask the daemon for each token: the session cannot be followed", metadata: ["error": "\(error)"])
        }
    }

    func stopFollowing() {
        following.stop()
        followed.withLock { $0 = nil }
    }

    /// A client connection closed. When it was the last, the memory its exchanges freed is
    /// given back to the kernel (glibc keeps a burst's freed memory for reuse otherwise: 64
    /// slow downloads left a proxy at 108 MiB).
    func connectionClosed(_ uid: UInt32?) {
        guard shares.give(uid) == 0 else { return }
        // Off the event loop, on a thread of its own (as a tunnel's, ``UpgradeExchange``): rare.
        _ = DetachedThread.start { _ = ag_release_free_memory() }
    }

    /// The followed token, when it is valid for the minimum validity still.
    func followedToken() -> TokenResult? {
        followed.withLock { token in
            guard let current = token, current.expiresAt.timeIntervalSinceNow > Double(configuration.minimumValidity) else { return nil }
            return current
        }
    }

    /// A token the daemon answered (after a refusal): taken until the watch says otherwise.
    func tookNew(_ token: TokenResult) {
        guard configuration.variant == nil else { return }
        followed.withLock { $0 = token }
    }

    /// The proxy answered itself.
    func refused(_ answer: ProxyAnswer) {
        counts.withLock { $0.ownAnswers[answer.reason, default: 0] += 1 }
        logger.info("answered \(answer.status): \(answer.sentence)", metadata: ["proxy.reason": "\(answer.reason)"])
    }

    func upstreamFailed(_ error: HTTPTransportError) {
        counts.withLock { $0.upstreamFailures += 1 }
        logger.warning("the upstream gave no answer", metadata: ["error": "\(error.message)"])
    }

    func answered(status: Int) {
        let index = min(max(status / 100, 1), 5) - 1
        counts.withLock { $0.upstreamAnswers[index] += 1 }
    }

    func retried(nonce: Bool) {
        counts.withLock {
            if nonce { $0.nonceRetries += 1 } else { $0.tokenRetries += 1 }
        }
    }
}

/// What a proxy has done, for its log and metrics.
public struct ProxyCounts: Sendable, Equatable {
    /// Requests read from clients.
    public var requests = 0
    /// Upstream answers passed on, by status class: index 0 for 1xx … 4 for 5xx.
    public var upstreamAnswers = [0, 0, 0, 0, 0]
    /// Requests sent once more with a DPoP nonce.
    public var nonceRetries = 0
    /// Requests sent once more with a new token after the upstream refused one.
    public var tokenRetries = 0
    /// Connections refused because of their caller's uid.
    public var callersRefused = 0
    /// Answers the proxy gave itself (refusals, no token, upstream unreachable), by reason.
    public var ownAnswers: [String: Int] = [:]
    /// Exchanges the upstream gave no answer to.
    public var upstreamFailures = 0
    /// Protocol upgrades (WebSocket) the upstream accepted: connections that became tunnels.
    public var upgrades = 0
}

/// How many client connections are open, in all and for each uid: a proxy that serves other
/// uids (`--allow-uid`) gives each at most half of `--max-connections`, so that one of them
/// cannot take every connection from the rest.
final class ConnectionShares: Sendable {
    let total: Int
    let perUID: Int
    private let open = Mutex<(all: Int, byUID: [UInt32?: Int])>((0, [:]))

    init(total: Int, perUID: Int) {
        self.total = total
        self.perUID = perUID
    }

    /// Takes a place for a connection of `uid`; `false` when it has none left.
    func take(_ uid: UInt32?) -> Bool {
        open.withLock { open in
            guard open.all < total, open.byUID[uid, default: 0] < perUID else { return false }
            open.all += 1
            open.byUID[uid, default: 0] += 1
            return true
        }
    }

    /// Gives a place back; returns how many connections are open now.
    func give(_ uid: UInt32?) -> Int {
        open.withLock { open in
            open.all -= 1
            let left = open.byUID[uid, default: 1] - 1
            open.byUID[uid] = left > 0 ? left : nil
            return open.all
        }
    }
}
