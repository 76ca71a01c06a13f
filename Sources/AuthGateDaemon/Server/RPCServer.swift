import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// A start-up problem with the socket, in words an admin can act on.
struct SocketSetupError: Error, CustomStringConvertible {
    var description: String
}

/// Serves JSON-RPC on the daemon's Unix socket.
///
/// Each connection is served by its ``RPCConnectionHandler`` on its event loop: its requests
/// are answered in order, and connections are served concurrently, at most
/// `limits.maximumConnections` of them. On graceful shutdown the listener closes, open
/// connections are closed and their requests cancelled (``OpenConnections``), and the socket
/// file is removed — unless systemd passed the socket (socket activation), which then stays
/// systemd's.
final class RPCServer: Service, CustomStringConvertible {
    private let socketPath: String
    private let socketGroup: String?
    private let inheritedSocket: Int32?
    private let limits: ConnectionLimits
    private let dispatcher: RPCDispatcher
    private let logger: Logger
    private let onListening: @Sendable () -> Void
    private let onStopping: @Sendable () -> Void
    private let connections: OpenConnections
    private let refusals: ConnectionRefusals
    private let metrics: DaemonMetrics?
    private let readiness: Readiness?

    /// - Parameters:
    ///   - inheritedSocket: A listening socket from systemd (`LISTEN_FDS`), served instead of
    ///     creating `socketPath`.
    ///   - onListening: Called once the socket accepts connections (readiness).
    ///   - onStopping: Called when the graceful shutdown begins.
    ///   - connections: The connections served, shared with the metrics.
    ///   - readiness: Told when the socket serves and when it stops (`/readyz`).
    init(socketPath: String, socketGroup: String?, inheritedSocket: Int32? = nil, limits: ConnectionLimits = ConnectionLimits(),
         dispatcher: RPCDispatcher, connections: OpenConnections = OpenConnections(), metrics: DaemonMetrics? = nil, readiness: Readiness? = nil,
         logger: Logger, onListening: @escaping @Sendable () -> Void = {}, onStopping: @escaping @Sendable () -> Void = {}) {
        self.connections = connections
        self.metrics = metrics
        self.readiness = readiness
        self.socketPath = socketPath
        self.socketGroup = socketGroup
        self.inheritedSocket = inheritedSocket
        self.limits = limits
        self.dispatcher = dispatcher
        self.logger = logger
        self.onListening = onListening
        self.onStopping = onStopping
        refusals = ConnectionRefusals(logger: logger)
    }

    var description: String { "RPCServer(\(socketPath))" }

    func run() async throws {
        let openProviders = dispatcher.services.registry.openProviders
        let answers = CachedTokenAnswers(tokens: dispatcher.services.broadcast.published, providers: openProviders, metrics: metrics)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            // Clients that half-close after writing (socat, `nc -N`) still get their answers.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                // A connection accepted before a reload adds an executables rule has no pin, and
                // the rule refuses it (AccessPolicy): it fails closed until it reconnects.
                PeerCredentials.read(from: channel, pinProcess: openProviders.anyExecutableRule).flatMapThrowing { caller in
                    try self.prepare(channel, for: caller, answers: answers)
                }
            }
        let listener: any Channel
        if let inheritedSocket {
            listener = try await bootstrap.withBoundSocket(inheritedSocket).get()
            logger.notice("listening on the socket systemd passed", metadata: ["socket.fd": "\(inheritedSocket)"])
        } else {
            try prepareSocketPath()
            listener = try await bootstrap.bind(unixDomainSocketPath: socketPath).get()
            try applyPermissions()
            logger.notice("listening", metadata: ["socket.path": "\(socketPath)"])
        }
        defer { if inheritedSocket == nil { unlink(socketPath) } }
        readiness?.socketServing(true)
        defer { readiness?.socketServing(false) }
        onListening()

        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                try? await listener.closeFuture.get()
            } onGracefulShutdown: {
                self.readiness?.socketServing(false)
                self.onStopping()
                listener.close(promise: nil)
            }
        } onCancel: {
            listener.close(promise: nil)
        }
        await connections.stop()
        logger.notice("stopped listening", metadata: ["socket.path": "\(socketPath)"])
    }

    /// Sets up a new connection's pipeline, on its event loop. One over the limit is still
    /// set up, to be told `rate_limited` and closed.
    private func prepare(_ channel: any Channel, for caller: PeerCredentials, answers: CachedTokenAnswers) throws {
        // Root and the daemon's own user administer it; everyone else holds at most a share.
        let share = caller.isUnbounded ? nil : limits.perUserShare
        let admission = connections.add(channel, uid: caller.uid, limit: limits.maximumConnections, share: share)
        if admission == .admitted {
            logger.debug("connection opened", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        } else {
            refusals.record(admission, uid: caller.uid, on: channel.eventLoop)
            metrics?.connectionRefused(admission == .tooManyOfOneUser ? .perUserShare : .limit)
        }
        let logger = logger
        let deadlines = ConnectionDeadlines(limits: limits) { reason in
            logger.notice("closing a connection: \(reason)", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        }
        let handler = RPCConnectionHandler(caller: caller, admission: admission, dispatcher: dispatcher, answers: answers, connections: connections,
                                           limits: limits, logger: logger)
        try channel.pipeline.syncOperations.addHandlers([
            deadlines, ByteToMessageHandler(LineFrameDecoder(maximumLength: RPCCoding.maximumLineLength)), handler,
        ])
    }

    /// Makes sure the socket can be created: its directory exists (0700 when we create it), and
    /// a file already there is a stale socket, not a live daemon or something else.
    private func prepareSocketPath() throws {
        let directory = URL(fileURLWithPath: socketPath).deletingLastPathComponent().path
        if !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw SocketSetupError(description: "cannot create the socket directory \(directory): \(error)")
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

