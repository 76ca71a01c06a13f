package import NIOCore

extension CallerCheck {
    /// The uid that owns the peer of a NIO TCP channel, by its two addresses (see
    /// ``tcpPeerUID(_:)``); `nil` when the kernel does not know it, or for a Unix socket.
    package static func tcpPeerUID(of channel: any Channel) -> UInt32? {
        guard let local = channel.localAddress.flatMap(SocketEnd.init), let peer = channel.remoteAddress.flatMap(SocketEnd.init) else { return nil }
        return tcpPeerUID(local: local, peer: peer)
    }
}

extension SocketEnd {
    /// An IPv4 or IPv6 address of NIO's; `nil` for a Unix socket's.
    init?(_ address: SocketAddress) {
        guard let text = address.ipAddress, let port = address.port, let parsed = IPAddress(text), let port = UInt16(exactly: port) else { return nil }
        self.init(address: parsed, port: port)
    }
}
