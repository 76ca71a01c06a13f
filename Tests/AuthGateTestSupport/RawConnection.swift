import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to 127.0.0.1, written and read as it is; every read waits at most
/// `timeout` seconds.
package final class RawConnection {
    private let descriptor: Int32
    package private(set) var received: [UInt8] = []

    package init(port: Int, timeout: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw TestFailure("cannot connect to 127.0.0.1:\(port)")
        }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    package func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until `enough` says so of all that was received, the peer closes, or a read
    /// times out: all that was received, as text.
    package func read(until enough: (String) -> Bool) -> String {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !enough(text) {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received += buffer.prefix(count)
        }
        return text
    }

    package var text: String { String(decoding: received, as: UTF8.self) }
}
