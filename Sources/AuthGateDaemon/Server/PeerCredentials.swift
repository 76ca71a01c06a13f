import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a connection, as the kernel says (`SO_PEERCRED`).
///
/// This is what the daemon trusts to tell users apart: sessions are keyed by `uid`, and
/// access rules look at the uid, its groups and the executable behind `pid`.
struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32

    init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    var description: String { "uid=\(uid) gid=\(gid) pid=\(pid)" }

    /// Root, or the daemon's own user: not bound by the per-user shares (connections, sessions,
    /// provider requests), which protect users from each other.
    var isUnbounded: Bool { uid == 0 || uid == geteuid() }

    /// Laid out like Linux's `struct ucred`, which Swift cannot import.
    struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// Reads the peer credentials of a connected Unix socket channel.
    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        let future: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return future.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
    }
}
