import AuthGateCore
import AuthGateRPC
import Foundation
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
/// Each connection is served by its own child task: its requests are answered in order, and
/// connections run concurrently. On graceful shutdown the listener closes, open connections
/// are cancelled, and the socket file is removed.
final class RPCServer: Service, CustomStringConvertible {
    private let socketPath: String
    private let socketGroup: String?
    private let dispatcher: RPCDispatcher
    private let logger: Logger

    init(socketPath: String, socketGroup: String?, dispatcher: RPCDispatcher, logger: Logger) {
        self.socketPath = socketPath
        self.socketGroup = socketGroup
        self.dispatcher = dispatcher
        self.logger = logger
    }

    var description: String { "RPCServer(\(socketPath))" }

    func run() async throws {
        try prepareSocketPath()
        let maximumLine = RPCCoding.maximumLineLength
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            // Clients that half-close after writing (socat, `nc -N`) still get their answers.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .bind(unixDomainSocketPath: socketPath) { channel in
                PeerCredentials.read(from: channel).flatMapThrowing { caller in
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maximumLength: maximumLine)))
                    let connection = try NIOAsyncChannel<LineFrame, ByteBuffer>(wrappingChannelSynchronously: channel)
                    return (caller, connection)
                }
            }
        defer { unlink(socketPath) }
        try applyPermissions()
        logger.notice("listening", metadata: ["socket.path": "\(socketPath)"])

        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await (caller, connection) in inbound {
                        group.addTask { await self.serve(connection, caller: caller) }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
        logger.notice("stopped listening", metadata: ["socket.path": "\(socketPath)"])
    }

    private func serve(_ connection: NIOAsyncChannel<LineFrame, ByteBuffer>, caller: PeerCredentials) async {
        logger.debug("connection opened", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        do {
            try await connection.executeThenClose { inbound, outbound in
                for try await frame in inbound {
                    switch frame {
                    case .line(let line):
                        guard line.readableBytesView.contains(where: { !$0.isJSONWhitespace }) else { continue }
                        if let response = await dispatcher.respond(to: Data(line.readableBytesView), from: caller) {
                            try await outbound.write(ByteBuffer(bytes: response))
                        }
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
