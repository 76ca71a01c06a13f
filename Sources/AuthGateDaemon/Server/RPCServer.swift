import AuthGateCore
import AuthGateRPC
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A start-up problem with the socket, in words an admin can act on.
struct SocketSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A connection as the listener hands it over: who called, and whether it is within
/// `ConnectionLimits.maximumConnections` (else it is refused).
struct AcceptedConnection: Sendable {
    var caller: PeerCredentials
    var connection: NIOAsyncChannel<LineFrame, ByteBuffer>
    var admitted: Bool
}

/// Serves JSON-RPC on the daemon's Unix socket.
///
/// Each connection is served by its own child task: its requests are answered in order, and
/// connections run concurrently, at most `limits.maximumConnections` of them. A plain `token`
/// call for a current token is answered before it reaches the task (``CachedTokenHandler``). On graceful
/// shutdown the listener closes, open connections are cancelled, and the socket file is
/// removed — unless systemd passed the socket (socket activation), which then stays systemd's.
final class RPCServer: Service, CustomStringConvertible {
    private let socketPath: String
    private let socketGroup: String?
    private let inheritedSocket: Int32?
    private let limits: ConnectionLimits
    private let dispatcher: RPCDispatcher
    private let logger: Logger
    private let onListening: @Sendable () -> Void
    private let onStopping: @Sendable () -> Void
    private let activeConnections = Atomic<Int>(0)

    /// - Parameters:
    ///   - inheritedSocket: A listening socket from systemd (`LISTEN_FDS`), served instead of
    ///     creating `socketPath`.
    ///   - onListening: Called once the socket accepts connections (readiness).
    ///   - onStopping: Called when the graceful shutdown begins.
    init(socketPath: String, socketGroup: String?, inheritedSocket: Int32? = nil, limits: ConnectionLimits = ConnectionLimits(),
         dispatcher: RPCDispatcher, logger: Logger, onListening: @escaping @Sendable () -> Void = {},
         onStopping: @escaping @Sendable () -> Void = {}) {
        self.socketPath = socketPath
        self.socketGroup = socketGroup
        self.inheritedSocket = inheritedSocket
        self.limits = limits
        self.dispatcher = dispatcher
        self.logger = logger
        self.onListening = onListening
        self.onStopping = onStopping
    }

    var description: String { "RPCServer(\(socketPath))" }

    func run() async throws {
        let maximumLine = RPCCoding.maximumLineLength
        let limits = limits
        let logger = logger
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            // Clients that half-close after writing (socat, `nc -N`) still get their answers.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let accepted = AcceptedConnections<LineFrame, ByteBuffer>()
        let answers = CachedTokenAnswers(tokens: dispatcher.sessions.published, providers: dispatcher.registry.openProviders)
        let initialize: @Sendable (any Channel) -> EventLoopFuture<AcceptedConnection> = { channel in
            PeerCredentials.read(from: channel).flatMapThrowing { caller in
                // Counted here, before the first line can be answered; the serving task counts it out.
                let admitted = self.activeConnections.add(1, ordering: .relaxed).newValue <= limits.maximumConnections
                if !admitted { self.activeConnections.subtract(1, ordering: .relaxed) }
                let deadlines = ConnectionDeadlines(limits: limits) { reason in
                    logger.notice("closing a connection: \(reason)", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
                }
                try channel.pipeline.syncOperations.addHandler(deadlines)
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maximumLength: maximumLine)))
                if admitted {
                    try channel.pipeline.syncOperations.addHandler(CachedTokenHandler(answers: answers, uid: caller.uid))
                }
                return AcceptedConnection(caller: caller, connection: try accepted.wrap(channel), admitted: admitted)
            }
        }
        let server: NIOAsyncChannel<AcceptedConnection, Never>
        if let inheritedSocket {
            server = try await bootstrap.bind(inheritedSocket, childChannelInitializer: initialize)
            logger.notice("listening on the socket systemd passed", metadata: ["socket.fd": "\(inheritedSocket)"])
        } else {
            try prepareSocketPath()
            server = try await bootstrap.bind(unixDomainSocketPath: socketPath, childChannelInitializer: initialize)
            try applyPermissions()
            logger.notice("listening", metadata: ["socket.path": "\(socketPath)"])
        }
        defer { if inheritedSocket == nil { unlink(socketPath) } }
        onListening()

        // Connections accepted as the listener closed never reach the loop: they are closed
        // after it, however it ended (NIO traps on an unconsumed one, swift-nio#2637).
        do {
            try await acceptConnections(server, accepted: accepted, limits: limits)
        } catch {
            await accepted.drain()
            throw error
        }
        await accepted.drain()
        logger.notice("stopped listening", metadata: ["socket.path": "\(socketPath)"])
    }

    private func acceptConnections(_ server: NIOAsyncChannel<AcceptedConnection, Never>,
                       accepted: AcceptedConnections<LineFrame, ByteBuffer>, limits: ConnectionLimits) async throws {
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await incoming in inbound {
                        let (caller, connection) = (incoming.caller, incoming.connection)
                        accepted.take(connection)
                        guard incoming.admitted else {
                            group.addTask { await self.refuse(connection, caller: caller) }
                            continue
                        }
                        group.addTask(executorPreference: EventLoopTaskExecutor(connection.channel.eventLoop)) {
                            await self.serve(connection, caller: caller)
                            self.activeConnections.subtract(1, ordering: .relaxed)
                        }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.onStopping()
            server.channel.close(promise: nil)
        }
    }

    /// One connection too many: an error line, then close.
    private func refuse(_ connection: NIOAsyncChannel<LineFrame, ByteBuffer>, caller: PeerCredentials) async {
        logger.warning("connection refused: too many connections", metadata: [
            "peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)", "connections.maximum": "\(limits.maximumConnections)",
        ])
        let error = AuthGateError(.rateLimited, "authgated serves at most \(limits.maximumConnections) connections at once; try again in a moment.",
                                  retryAfterSeconds: 1)
        try? await connection.executeThenClose { _, outbound in
            try await outbound.write(ByteBuffer(bytes: dispatcher.encodeError(error, id: nil)))
        }
    }

    private func serve(_ connection: NIOAsyncChannel<LineFrame, ByteBuffer>, caller: PeerCredentials) async {
        logger.debug("connection opened", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        do {
            try await connection.executeThenClose { inbound, outbound in
                for try await frame in inbound {
                    switch frame {
                    case .line(let line):
                        // Every line gets one write, empty for blank lines and notifications, so
                        // that ConnectionDeadlines knows when nothing is left to answer.
                        guard line.readableBytesView.contains(where: { !$0.isJSONWhitespace }) else {
                            try await outbound.write(ByteBuffer())
                            continue
                        }
                        let response = await dispatcher.respond(to: Data(line.readableBytesView), from: caller)
                        try await outbound.write(response.map { ByteBuffer(bytes: $0) } ?? ByteBuffer())
                    case .tooLong:
                        logger.notice("request line too long; closing the connection", metadata: ["peer.uid": "\(caller.uid)"])
                        let error = AuthGateError(.requestTooLarge, "A request line may be at most \(RPCCoding.maximumLineLength) bytes; closing the connection.")
                        try await outbound.write(ByteBuffer(bytes: dispatcher.encodeError(error, id: nil)))
                        return
                    }
                }
            }
        } catch {
            logger.debug("connection ended with an error", metadata: ["peer.uid": "\(caller.uid)", "error": "\(error)"])
        }
    }

    /// Makes sure the socket can be created: its directory exists (0700 when we create it), and
    /// a file already there is a stale socket, not a live daemon or something else.
    private func prepareSocketPath() throws {
        let directory = (socketPath as NSString).deletingLastPathComponent
        if !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw SocketSetupError(description: "cannot create the socket directory \(directory): \(error.localizedDescription)")
            }
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: socketPath) else { return }
        guard attributes[.type] as? FileAttributeType == .typeSocket else {
            throw SocketSetupError(description: "\(socketPath) exists and is not a socket; remove it or choose another --socket")
        }
        if (try? RPCConnection(path: socketPath)) != nil {
            throw SocketSetupError(description: "another authgated is already listening on \(socketPath)")
        }
        unlink(socketPath)
    }

    /// 0600, or 0660 with the configured group.
    private func applyPermissions() throws {
        guard let socketGroup else {
            chmod(socketPath, 0o600)
            return
        }
        guard let gid = AccessPolicy.groupID(named: socketGroup) else {
            throw SocketSetupError(description: "the socket group \"\(socketGroup)\" does not exist")
        }
        guard chown(socketPath, uid_t(bitPattern: -1), gid) == 0 else {
            throw SocketSetupError(description: "cannot give \(socketPath) to the group \"\(socketGroup)\": \(String(cString: strerror(errno)))")
        }
        chmod(socketPath, 0o660)
    }
}

