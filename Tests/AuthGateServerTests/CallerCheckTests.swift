import Testing

@testable import AuthGateServer

#if canImport(Glibc)
import Glibc
#endif

/// The uid of a loopback connection's other end, from the kernel's socket table.
@Suite("Who is at the other end of a loopback connection")
struct CallerCheckTests {
    // Lines as /proc/net/tcp prints them (proc(5)): 127.0.0.1:8787 (0x2253) listening, a
    // connection to it from 127.0.0.1:40000 (0x9C40) owned by uid 1000, and the proxy's end.
    static let table = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 0100007F:2253 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 1111 1 0 100 0 0 10 0
           1: 0100007F:9C40 0100007F:2253 01 00000000:00000000 00:00000000 00000000  1000        0 2222 1 0 20 4 30 10 -1
           2: 0100007F:2253 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1001        0 3333 1 0 20 4 30 10 -1
        """

    @Test("the row whose local address is the peer and whose remote address is the proxy's end gives the uid")
    func findsThePeersRow() throws {
        let proxyEnd = SocketEnd(address: try #require(IPAddress("127.0.0.1")), port: 0x2253)
        let peer = SocketEnd(address: try #require(IPAddress("127.0.0.1")), port: 0x9C40)
        #expect(CallerCheck.owner(of: peer, connectedTo: proxyEnd, table: Self.table) == 1000)
        #expect(CallerCheck.owner(of: proxyEnd, connectedTo: peer, table: Self.table) == 1001)
    }

    @Test(
        "a peer that sent its request and closed at once has no owner, though the kernel still lists its socket (closed, or TIME_WAIT with uid 0): it must not pass as root"
    )
    func closedPeerHasNoOwner() throws {
        let (client, accepted) = try Self.loopbackConnection()
        defer { close(accepted) }
        let request = Array("POST /delete HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        #expect(request.withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) } == request.count)
        close(client)
        let proxyEnd = try #require(SocketEnd.local(of: accepted))
        let peer = try #require(SocketEnd.peer(of: accepted))
        #expect(CallerCheck.diagnosedOwner(of: peer, connectedTo: proxyEnd) == .none)
        #expect(CallerCheck.tcpPeerUID(accepted) == nil)
        // The table's way: a TIME_WAIT row has uid 0 and inode 0.
        let timeWait = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:9C40 0100007F:2253 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
            """
        let server = SocketEnd(address: try #require(IPAddress("127.0.0.1")), port: 0x2253)
        let closed = SocketEnd(address: try #require(IPAddress("127.0.0.1")), port: 0x9C40)
        #expect(CallerCheck.owner(of: closed, connectedTo: server, table: timeWait) == nil)
    }

    @Test("a peer with no row (gone already, or another port) has no owner: the check fails closed")
    func noRowNoOwner() throws {
        let proxyEnd = SocketEnd(address: try #require(IPAddress("127.0.0.1")), port: 0x2253)
        let other = SocketEnd(address: try #require(IPAddress("127.0.0.1")), port: 0x9C41)
        #expect(CallerCheck.owner(of: other, connectedTo: proxyEnd, table: Self.table) == nil)
        #expect(CallerCheck.owner(of: other, connectedTo: proxyEnd, table: "garbage\n1: zz:zz yy 01 0 0 0 0") == nil)
    }

    @Test("IPv6 rows: four words in the host's byte order")
    func ipv6Rows() throws {
        // ::1 port 8787, as /proc/net/tcp6 prints it on a little-endian machine.
        let column: Substring = "00000000000000000000000001000000:2253"
        let end = try #require(SocketEnd(procColumn: column))
        #expect(end == SocketEnd(address: try #require(IPAddress("::1")), port: 8787))
        #expect(end.address.isLoopback)
    }

    @Test(
        "a real loopback connection of this process is found with this process's uid, asked of the kernel by its two ends (sock_diag); a port with no socket has none"
    )
    func realConnection() throws {
        let (client, accepted) = try Self.loopbackConnection()
        defer {
            close(client)
            close(accepted)
        }
        #expect(CallerCheck.tcpPeerUID(accepted) == geteuid())
        let proxyEnd = try #require(SocketEnd.local(of: accepted))
        let peer = try #require(SocketEnd.peer(of: accepted))
        #expect(CallerCheck.diagnosedOwner(of: peer, connectedTo: proxyEnd) == .owner(geteuid()))
        #expect(CallerCheck.diagnosedOwner(of: proxyEnd, connectedTo: peer) == .owner(geteuid()))
        // A made-up peer: neither end is known, which is also what a kernel without TCP
        // diagnostics answers; the table is read then.
        let nobody = SocketEnd(address: peer.address, port: peer.port == 65535 ? 1 : peer.port + 1)
        #expect(CallerCheck.diagnosedOwner(of: nobody, connectedTo: proxyEnd) == .cannotAsk)

    }

    /// A connection on 127.0.0.1 within this process: the client's socket and the one accepted
    /// for it (the listener is closed again).
    static func loopbackConnection() throws -> (client: Int32, accepted: Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try #require(withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } } == 0)
        try #require(listen(listener, 1) == 0)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) } } == 0)
        return (client, accept(listener, nil, nil))
    }
}
