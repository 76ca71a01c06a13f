import AuthGateCore
import AuthGateRPC
import CLinux
import FoundationEssentials
package import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A start-up problem with the socket, in words an admin can act on.
package struct SocketSetupError: Error, CustomStringConvertible {
    package var description: String

    package init(description: String) {
        self.description = description
    }
}

/// Serves JSON-RPC on the daemon's Unix socket.
///
/// ``FrontDoor`` accepts every connection and answers plain cached `token` calls on its own
/// thread; it hands every other connection on to NIO, where its ``RPCConnectionHandler``
/// serves it on its event loop: its requests are answered in order, and connections are
/// served concurrently, at most `limits.maximumConnections` of them in all. On graceful shutdown the listener closes, open
/// connections are closed and their requests cancelled (``OpenConnections``), and the socket
/// file is removed — unless systemd passed the socket (socket activation), which then stays
/// systemd's.
package final class RPCServer: Service, CustomStringConvertible {
    private let socketPath: String
    private let socketGroup: String?
    private let inheritedSocket: Int32?
    private let limits: ConnectionLimits
    private let responder: any RequestResponder
    /// Plain `token` calls answered without the responder, at the front door and on the event loops.
    private let answers: any TokenAnswers
    private let logger: Logger
    private let onListening: @Sendable () -> Void
    private let onStopping: @Sendable () -> Void
    private let connections: OpenConnections
    private let refusals: BatchedNotices
    private let timeouts: BatchedNotices
    private let oversizedLines: BatchedNotices
    private let refused: @Sendable (OpenConnections.Admission) -> Void
    private let serving: @Sendable (Bool) -> Void

    /// - Parameters:
    ///   - inheritedSocket: A listening socket from systemd (`LISTEN_FDS`), served instead of
    ///     creating `socketPath`.
    ///   - onListening: Called once the socket accepts connections (readiness).
    ///   - onStopping: Called when the graceful shutdown begins.
    ///   - responder: Answers every line `answers` does not (the daemon's dispatcher).
    ///   - connections: The connections served, shared with the metrics.
    ///   - refused: Told of each connection refused for being over a limit (the metrics).
    ///   - serving: Told when the socket serves and when it stops (`/readyz`).
    package init(
        socketPath: String,
        socketGroup: String?,
        inheritedSocket: Int32? = nil,
        limits: ConnectionLimits = ConnectionLimits(),
        responder: any RequestResponder,
        answers: any TokenAnswers,
        connections: OpenConnections = OpenConnections(),
        refused: @escaping @Sendable (OpenConnections.Admission) -> Void = { _ in },
        serving: @escaping @Sendable (Bool) -> Void = { _ in },
        logger: Logger,
        onListening: @escaping @Sendable () -> Void = {},
        onStopping: @escaping @Sendable () -> Void = {}
    ) {
        self.connections = connections
        self.refused = refused
        self.serving = serving
        self.socketPath = socketPath
        self.socketGroup = socketGroup
        self.inheritedSocket = inheritedSocket
        self.limits = limits
        self.responder = responder
        self.answers = answers
        self.logger = logger
        self.onListening = onListening
        self.onStopping = onStopping
        refusals = .refusals(logger: logger)
        timeouts = .timeouts(logger: logger)
        oversizedLines = .oversizedLines(logger: logger)
    }

    package var description: String { "RPCServer(\(socketPath))" }

    package func run() async throws {
        let listener: Int32
        if let inheritedSocket {
            listener = inheritedSocket
            logger.notice("listening on the socket systemd passed", metadata: ["socket.fd": "\(inheritedSocket)"])
        } else {
            try prepareSocketPath()
            listener = try bind()
            logger.notice("listening", metadata: ["socket.path": "\(socketPath)"])
        }
        let door: FrontDoor
        do {
            door = try FrontDoor(
                listener: listener,
                limits: limits,
                connections: connections,
                answers: answers,
                logger: logger,
                timeouts: timeouts
            ) { handOff in
                self.serveWithNIO(handOff)
            }
        } catch {
            close(listener)
            throw error
        }
        defer { if inheritedSocket == nil { unlink(socketPath) } }
        serving(true)
        defer { serving(false) }
        onListening()

        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await door.run()
            } onGracefulShutdown: {
                self.serving(false)
                self.onStopping()
                door.stop()
            }
        } onCancel: {
            door.stop()
        }
        await connections.stop()
        logger.notice("stopped listening", metadata: ["socket.path": "\(socketPath)"])
    }

    /// Serves a connection ``FrontDoor`` handed on: a channel on one of NIO's event loops,
    /// which first writes what the front door could not and reads what it read (``HandedOnBytes``).
    /// The channel adopts the connection (``ClientConnection``) as it is set up; a connection
    /// that fails before that is closed and its place given back, once, by ``ClientConnection``.
    private func serveWithNIO(_ handOff: FrontDoor.HandOff) {
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        ClientBootstrap(group: eventLoop)
            // Clients that half-close after writing (socat, `nc -N`) still get their answers.
            .channelOption(.allowRemoteHalfClosure, value: true)
            // One small read per event: what a connection's lines can cost the daemon before its
            // answers are held back (RPCConnectionHandler) is one read's worth, not NIO's default
            // of up to 4 reads of up to 64 KiB.
            .channelOption(.maxMessagesPerRead, value: 1)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: Self.readSize))
            .channelInitializer { channel in
                eventLoop.makeCompletedFuture {
                    try self.prepare(channel, handOff)
                }
            }
            .withConnectedSocket(handOff.connection.descriptor)
            .whenFailure { error in
                self.logger.warning("cannot serve a connection", metadata: ["error": "\(error)", "peer.uid": "\(handOff.connection.caller.uid)"])
                handOff.connection.close()
            }
    }

    /// The bytes one read of a handed-on connection takes: a request line is rarely longer, and
    /// a longer one (up to `RPCCoding.maximumLineLength`) is read in several.
    static let readSize = 4096

    /// Sets up a handed-on connection's pipeline, on its event loop. One over the limit is
    /// set up too, to be told `rate_limited` and closed.
    private func prepare(_ channel: any Channel, _ handOff: FrontDoor.HandOff) throws {
        let caller = handOff.connection.caller
        let admission = handOff.connection.admission
        connections.adopt(channel, handOff.connection)
        if admission != .admitted {
            let cause = admission == .tooManyOfOneUser ? "per-user share" : "limit"
            refusals.record(cause, message: "connection refused: too many connections (\(cause))", uid: caller.uid, on: channel.eventLoop)
            refused(admission)
        }
        let timeouts = timeouts
        let eventLoop = channel.eventLoop
        let deadlines = ConnectionDeadlines(limits: limits, bytesArrived: handOff.bytesArrived) { reason in
            timeouts.record(reason, message: "closing a connection: \(reason)", uid: caller.uid, metadata: ["peer.pid": "\(caller.pid)"], on: eventLoop)
        }
        let handler = RPCConnectionHandler(
            caller: caller,
            admission: admission,
            responder: responder,
            answers: answers,
            connections: connections,
            limits: limits,
            oversizedLines: oversizedLines,
            logger: logger
        )
        var handlers: [any ChannelHandler] = []
        if !handOff.unread.isEmpty || !handOff.unwritten.isEmpty {
            handlers.append(HandedOnBytes(unread: handOff.unread, unwritten: handOff.unwritten))
        }
        try channel.pipeline.syncOperations.addHandlers(
            handlers + [
                deadlines, ByteToMessageHandler(LineFrameDecoder(maximumLength: RPCCoding.maximumLineLength)), handler,
            ]
        )
    }

    /// The listening socket at `socketPath`, 0600 or 0660 with the configured group.
    private func bind() throws -> Int32 {
        let path = Array(socketPath.utf8)
        let listener = path.withUnsafeBufferPointer { path in
            path.withMemoryRebound(to: CChar.self) { ag_bind_unix($0.baseAddress, $0.count, Int32(SOCK_STREAM.rawValue), 256) }
        }
        guard listener >= 0 else {
            let reason = errno == EINVAL ? "the path is too long for a Unix socket" : String(cString: strerror(errno))
            throw SocketSetupError(description: "cannot listen on \(socketPath): \(reason)")
        }
        do {
            try applyPermissions()
        } catch {
            close(listener)
            unlink(socketPath)
            throw error
        }
        return listener
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
        // Something accepting a connection there is another daemon: the socket is not stale.
        let probe = ag_connect_unix(socketPath, socketPath.utf8.count)
        if probe >= 0 {
            close(probe)
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
        guard let gid = SystemGroups.id(named: socketGroup) else {
            throw SocketSetupError(description: "the socket group \"\(socketGroup)\" does not exist")
        }
        guard chown(socketPath, uid_t(bitPattern: -1), gid) == 0 else {
            throw SocketSetupError(description: "cannot give \(socketPath) to the group \"\(socketGroup)\": \(String(cString: strerror(errno)))")
        }
        chmod(socketPath, 0o660)
    }
}
