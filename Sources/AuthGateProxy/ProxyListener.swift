import AuthGateServer
import CLinux
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The proxy's listening socket and the thread that accepts on it.
///
/// Connections are accepted here, not by NIO, so that the caller is checked (``CallerCheck``)
/// before anything reads a byte of its request: a refused connection gets a 403 written
/// straight to it and is closed; an admitted one is handed to NIO.
final class ProxyListener: Sendable {
    let descriptor: Int32
    /// Where it listens, with the port the kernel chose for port 0.
    let address: ListenAddress
    private let stopped = Atomic<Bool>(false)

    /// Binds and listens.
    /// - Parameter socketGroup: With a Unix socket, the group given read and write on it.
    init(_ listen: ListenAddress, socketGroup: UInt32?) throws(ProxyConfigurationError) {
        switch listen {
        case .unix(let path):
            try Self.removeStaleSocket(path)
            // The socket is made with no access for group and others, then opened to the group:
            // no moment in which another user could connect.
            let previous = umask(0o177)
            let fd = ag_bind_unix(path, path.utf8.count, Int32(SOCK_STREAM.rawValue), 512)
            let saved = errno
            umask(previous)
            guard fd >= 0 else { throw ProxyConfigurationError("cannot listen on \(path): \(String(cString: strerror(saved)))") }
            if let socketGroup {
                guard chown(path, UInt32.max, socketGroup) == 0, chmod(path, 0o660) == 0 else {
                    let reason = String(cString: strerror(errno))
                    close(fd)
                    unlink(path)
                    throw ProxyConfigurationError("cannot give group \(socketGroup) the socket \(path): \(reason)")
                }
            }
            descriptor = fd
            address = listen
        case .tcp(let host, let port):
            (descriptor, address) = try Self.bindTCP(host: host, port: port)
        }
    }

    /// Accepts until ``stop()``, handing each connection to `handle` on this thread. When the
    /// process or the system is out of descriptors or memory, it waits a tenth of a second
    /// before the next try (the connection waits in the backlog) instead of spinning; any other
    /// failure is told to `failed` and tried again after a second, so that the proxy never
    /// stops accepting while it runs.
    func run(_ handle: (Int32) -> Void, failed: (_ errno: Int32) -> Void) {
        while !stopped.load(ordering: .acquiring) {
            let connection = accept4(descriptor, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            guard connection < 0 else {
                handle(connection)
                continue
            }
            let error = errno
            guard !stopped.load(ordering: .acquiring) else { return }
            switch error {
            case EINTR, ECONNABORTED, EPROTO: continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM: usleep(100_000)
            default:
                failed(error)
                sleep(1)
            }
        }
    }

    /// Stops accepting (wakes ``run(_:)``), closes the socket and removes a Unix socket's file.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        if case .unix(let path) = address { unlink(path) }
    }

    private static func bindTCP(host: String, port: Int) throws(ProxyConfigurationError) -> (Int32, ListenAddress) {
        let family = host.contains(":") ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ProxyConfigurationError("cannot make a socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let length: socklen_t
        if family == AF_INET6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            withUnsafeBytes(of: address) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            withUnsafeBytes(of: address) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        }
        let bound = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 512) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ProxyConfigurationError("cannot listen on \(ListenAddress.tcp(host: host, port: port)): \(reason)")
        }
        let actual = SocketEnd.local(of: fd).map { Int($0.port) } ?? port
        return (fd, .tcp(host: host, port: actual))
    }

    /// A socket file left by a proxy that is gone is removed; anything else at the path is
    /// left alone and refused.
    private static func removeStaleSocket(_ path: String) throws(ProxyConfigurationError) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw ProxyConfigurationError("\(path) exists and is not a socket: remove it or choose another path")
        }
        let probe = ag_connect_unix(path, path.utf8.count)
        if probe >= 0 {
            close(probe)
            throw ProxyConfigurationError("something already listens on \(path)")
        }
        unlink(path)
    }
}
