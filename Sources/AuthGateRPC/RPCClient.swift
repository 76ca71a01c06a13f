import AuthGateCore
import FoundationEssentials
import Glibc

/// Why a call to the daemon failed.
public enum RPCClientError: Error, Sendable, CustomStringConvertible {
    /// Nothing listens at the socket, or it cannot be opened.
    case daemonUnreachable(path: String, detail: String)
    /// The daemon answered with an error.
    case remote(RPCErrorObject)
    /// The daemon answered something that is not a valid response, or hung up.
    case protocolError(String)

    public var description: String {
        switch self {
        case .daemonUnreachable(let path, let detail): "cannot reach authgated at \(path): \(detail)"
        case .remote(let error): error.description
        case .protocolError(let detail): "unexpected answer from authgated: \(detail)"
        }
    }
}

/// A blocking JSON-RPC connection to the daemon over its Unix socket.
///
/// Deliberately plain POSIX: the CLI runs inside `$(...)` and credential helpers, so it must
/// start fast and pays for no event loop. One connection carries any number of calls.
public final class RPCConnection {
    public let path: String
    /// The connected socket, which the connection owns and closes: for what a caller checks on
    /// it (a poll, a socket option), not for reading or writing beside the connection.
    public let descriptor: Int32
    private var buffer: [UInt8] = []
    /// How much of `buffer` is known to hold no newline: each read is searched once, so a long
    /// answer costs one pass over its bytes rather than one per 16 KiB read.
    private var searched = 0
    private var nextID: Int64 = 1

    /// Connects to the daemon's socket at `path`.
    public init(path: String) throws(RPCClientError) {
        self.path = path
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw .daemonUnreachable(path: path, detail: "the socket path is longer than 107 bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .daemonUnreachable(path: path, detail: String(cString: strerror(errno))) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            let detail =
                switch code {
                case ENOENT: "no socket there (is authgated running? start it, or set AUTHGATE_SOCKET)"
                // A file nothing listens on: left by a daemon that crashed, or by a forward (`ssh -R`)
                // whose connection ended.
                case ECONNREFUSED:
                    "connection refused: nothing listens on it (authgated is not running, or the ssh connection that forwarded this socket has ended)"
                case EACCES: "permission denied (you are not allowed to use this socket)"
                default: String(cString: strerror(code))
                }
            throw .daemonUnreachable(path: path, detail: detail)
        }
        descriptor = fd
    }

    deinit {
        close(descriptor)
    }

    /// Calls `method` and decodes its result.
    /// - Throws: ``RPCClientError/remote(_:)`` with the daemon's error, or a transport error.
    public func call<Params: Encodable, Result: Decodable>(
        _ method: RPCMethod,
        _ params: Params,
        as: Result.Type = Result.self
    ) throws(RPCClientError) -> Result {
        let id = RPCID.number(nextID)
        nextID += 1
        var line: Data
        do {
            line = try RPCCoding.makeEncoder().encode(RPCRequest(id: id, method: method, params: params))
        } catch {
            throw .protocolError("cannot encode the request: \(error)")
        }
        line.append(0x0A)
        try send(Array(line))
        guard let reply = try receiveLine() else {
            throw .protocolError("the daemon closed the connection")
        }
        return try Self.decodeReply(reply, id: id, as: Result.self)
    }

    /// Decodes the reply to the request `id`.
    /// - Throws: ``RPCClientError/remote(_:)`` with the daemon's error, or ``RPCClientError/protocolError(_:)``.
    public static func decodeReply<Result: Decodable>(_ reply: [UInt8], id: RPCID, as: Result.Type = Result.self) throws(RPCClientError) -> Result {
        let response: RPCResponseEnvelope<Result>
        do {
            response = try RPCCoding.makeDecoder().decode(RPCResponseEnvelope<Result>.self, from: Data(reply))
        } catch {
            throw .protocolError("cannot decode the response: \(error)")
        }
        if let error = response.error { throw .remote(error) }
        guard response.id == id else { throw .protocolError("response id does not match the request") }
        guard let result = response.result else { throw .protocolError("response has neither result nor error") }
        return result
    }

    /// Writes raw bytes; for tests of malformed input.
    public func send(_ bytes: [UInt8]) throws(RPCClientError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .protocolError("write failed: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Ends a ``receiveLine()`` blocked on another thread (it returns `nil`), from any thread:
    /// how a watch is stopped. Only while the connection is open.
    public var interrupter: Interrupter { Interrupter(descriptor: descriptor) }

    public struct Interrupter: Sendable {
        let descriptor: Int32

        public func interrupt() {
            shutdown(descriptor, Int32(SHUT_RDWR))
        }
    }

    /// Half-closes the connection: the daemon sees end of input and still answers.
    public func shutdownWrite() throws(RPCClientError) {
        guard shutdown(descriptor, Int32(SHUT_WR)) == 0 else {
            throw .protocolError("shutdown failed: \(String(cString: strerror(errno)))")
        }
    }

    /// Reads one `\n`-terminated line (without the newline); `nil` when the daemon hung up.
    public func receiveLine() throws(RPCClientError) -> [UInt8]? {
        while true {
            let found = buffer.withUnsafeBytes { bytes -> Int? in
                guard bytes.count > searched, let base = bytes.baseAddress, let hit = memchr(base + searched, 0x0A, bytes.count - searched) else {
                    return nil
                }
                return base.distance(to: UnsafeRawPointer(hit))
            }
            if let newline = found {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                searched = 0
                return line
            }
            searched = buffer.count
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .protocolError("read failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return nil }
            buffer += chunk[..<count]
            if buffer.count > RPCCoding.maximumResponseLength {
                throw .protocolError("response line too long")
            }
        }
    }
}
