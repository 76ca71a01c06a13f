import CLinux
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Which user is at the other end of a connection, as the kernel says: `authgate proxy`'s
/// callers, and the browser that brings a sign-in's redirect to the daemon's loopback port.
///
/// On a Unix socket that is `SO_PEERCRED`. A loopback TCP connection carries no credentials,
/// and any local user can open one; but the kernel's socket table knows who owns the socket
/// at the other end: the row of `/proc/net/tcp` (or `tcp6`) whose local address is the
/// connection's peer and whose remote address is our own end has the owner's uid
/// (proc(5), "/proc/net/tcp"). The table is read in our network namespace, where both
/// ends of a loopback connection live. A connection whose row is gone (the peer closed it
/// already) is refused: the check fails closed.
package enum CallerCheck {
    /// The uid that owns the peer of `descriptor`, a Unix stream socket.
    package static func unixPeerUID(_ descriptor: Int32) -> UInt32? {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard ag_peer_credentials(descriptor, &pid, &uid, &gid) == 0 else { return nil }
        return uid
    }

    /// The uid that owns the peer of `descriptor`, an accepted loopback TCP connection: asked
    /// of the kernel by the connection's two ends (sock_diag), one lookup however many sockets
    /// the host has; read from `/proc/net/tcp` only where the kernel cannot be asked.
    package static func tcpPeerUID(_ descriptor: Int32) -> UInt32? {
        guard let local = SocketEnd.local(of: descriptor), let peer = SocketEnd.peer(of: descriptor) else { return nil }
        return tcpPeerUID(local: local, peer: peer)
    }

    static func tcpPeerUID(local: SocketEnd, peer: SocketEnd) -> UInt32? {
        switch diagnosedOwner(of: peer, connectedTo: local) {
        case .owner(let uid): return uid
        case .none: return nil
        case .cannotAsk: break
        }
        let table = local.address.bytes.count == 4 ? "/proc/net/tcp" : "/proc/net/tcp6"
        guard let text = readWhole(table) else { return nil }
        return owner(of: peer, connectedTo: local, table: text)
    }

    enum Diagnosis: Equatable {
        case owner(UInt32)
        /// The kernel has no such socket (the peer closed it already): the check fails closed.
        case none
        /// The kernel cannot be asked (no sock_diag here).
        case cannotAsk
    }

    /// The owner of the TCP socket at `end` connected to `remote`, as sock_diag(7) tells it.
    ///
    /// A socket no process holds any more (its owner closed it: an orphan, or the remnant the
    /// kernel keeps in TIME_WAIT, whose uid it reports as 0) has no owner: a caller that sends
    /// a request and closes at once must not pass as root. And the kernel answers "no such
    /// socket" (ENOENT) also when it has no TCP diagnostics at all (tcp_diag not loaded, nor
    /// loadable in a container), so a socket not found is taken as gone only when the one at
    /// the other end, which the proxy holds, is found.
    static func diagnosedOwner(of end: SocketEnd, connectedTo remote: SocketEnd) -> Diagnosis {
        switch lookUp(end, connectedTo: remote) {
        case .some(.some(let found)):
            return found.inode == 0 ? .none : .owner(found.uid)
        case .some(.none):
            if case .some(.some) = lookUp(remote, connectedTo: end) { return .none }
            return .cannotAsk
        case .none:
            return .cannotAsk
        }
    }

    /// The socket's uid and inode; `.some(nil)` when the kernel knows no such socket, `nil`
    /// when it cannot be asked.
    private static func lookUp(_ end: SocketEnd, connectedTo remote: SocketEnd) -> (uid: UInt32, inode: UInt32)?? {
        guard end.address.bytes.count == remote.address.bytes.count else { return .some(nil) }
        var uid: UInt32 = 0
        var inode: UInt32 = 0
        let result = end.address.bytes.withUnsafeBufferPointer { local in
            remote.address.bytes.withUnsafeBufferPointer { other in
                ag_tcp_socket_owner(local.baseAddress, end.port, other.baseAddress, remote.port, Int32(local.count), &uid, &inode)
            }
        }
        if result == 0 { return .some((uid, inode)) }
        return errno == ENOENT ? .some(nil) : nil
    }

    /// A file of /proc, read to its end (such files say their size is 0).
    private static func readWhole(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk.prefix(count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The uid column of the row in a `/proc/net/tcp{,6}` table for the socket at `end`
    /// connected to `remote`.
    static func owner(of end: SocketEnd, connectedTo remote: SocketEnd, table: String) -> UInt32? {
        for line in table.split(separator: "\n").dropFirst() {
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
            let columns = line.split(separator: " ", omittingEmptySubsequences: true)
            guard columns.count > 7, let local = SocketEnd(procColumn: columns[1]), let rem = SocketEnd(procColumn: columns[2]) else { continue }
            // A socket no process holds (inode 0: closed, or TIME_WAIT with uid 0) has no owner.
            if local == end && rem == remote { return columns.count > 9 && columns[9] != "0" ? UInt32(columns[7]) : nil }
        }
        return nil
    }
}

/// An address and port.
package struct SocketEnd: Hashable, Sendable {
    package var address: IPAddress
    package var port: UInt16

    package init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6), as /proc/net/tcp prints
    /// them: each 32-bit word of the address in the host's byte order, the port in hex.
    init?(procColumn column: Substring) {
        let parts = column.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1], radix: 16), parts[0].count == 8 || parts[0].count == 32 else { return nil }
        var bytes: [UInt8] = []
        var words = parts[0][...]
        while !words.isEmpty {
            guard let word = UInt32(words.prefix(8), radix: 16) else { return nil }
            // The kernel printed the word as the host (little-endian) loaded it from memory.
            bytes += withUnsafeBytes(of: word.littleEndian) { Array($0) }
            words = words.dropFirst(8)
        }
        self.init(address: IPAddress(bytes: bytes), port: port)
    }

    package static func local(of descriptor: Int32) -> SocketEnd? { read(descriptor, peer: false) }

    package static func peer(of descriptor: Int32) -> SocketEnd? { read(descriptor, peer: true) }

    /// An end of an IPv4 or IPv6 socket (`ag_socket_end`: the C structures stay in C).
    private static func read(_ descriptor: Int32, peer: Bool) -> SocketEnd? {
        var bytes = [UInt8](repeating: 0, count: 16)
        var length: Int32 = 0
        var port: UInt16 = 0
        guard ag_socket_end(descriptor, peer ? 1 : 0, &bytes, &length, &port) == 0 else { return nil }
        return SocketEnd(address: IPAddress(bytes: Array(bytes.prefix(Int(length)))), port: port)
    }
}

/// A numeric IPv4 or IPv6 address, as the kernel's socket tables print them.
package struct IPAddress: Hashable, Sendable {
    /// 4 or 16 bytes in network order.
    package var bytes: [UInt8]

    package init?(_ text: String) {
        var raw = [UInt8](repeating: 0, count: 16)
        let length = ag_parse_address(text, &raw)
        guard length > 0 else { return nil }
        bytes = Array(raw.prefix(Int(length)))
    }

    package init(bytes: [UInt8]) { self.bytes = bytes }

    /// 127.0.0.0/8, ::1, or an IPv4-mapped loopback address.
    package var isLoopback: Bool {
        if bytes.count == 4 { return bytes[0] == 127 }
        if bytes == Array(repeating: 0, count: 15) + [1] { return true }
        return bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] && bytes[12] == 127
    }
}
