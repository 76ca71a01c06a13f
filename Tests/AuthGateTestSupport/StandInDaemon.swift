import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A daemon on a Unix socket that answers each request line with `reply(method, id)`, on as
/// many connections as come, until it is released; it keeps the lines it read (`requests`).
/// What the tools' steps are tested against in process, where the answer is the point.
package final class StandInDaemon: Sendable {
    package let path: String
    private let listener: Int32
    private let received = Lines()

    private final class Lines: Sendable {
        let lines = Mutex<[String]>([])
    }

    /// - Parameter reply: The answer line (without its newline; lines joined by newlines for
    ///   an answer and the notifications after it) to a request of `method`, whose id is `id`
    ///   (as it appeared on the wire); `nil` closes the connection without an answer.
    package init(in directory: String, reply: @escaping @Sendable (_ method: String, _ id: String) -> String?) throws {
        path = directory + "/s.sock"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
        let socketFD = listener
        let received = received
        Thread {
            // Until deinit shuts the listener down, which ends accept; the descriptor is closed
            // here, after that, so that no later socket given its number is accepted from.
            defer { close(socketFD) }
            while case let connection = accept(socketFD, nil, nil), connection >= 0 {
                defer { close(connection) }
                var line: [UInt8] = []
                var byte: UInt8 = 0
                while read(connection, &byte, 1) == 1 {
                    guard byte == UInt8(ascii: "\n") else {
                        line.append(byte)
                        continue
                    }
                    let request = String(decoding: line, as: UTF8.self)
                    line = []
                    received.lines.withLock { $0.append(request) }
                    let id = request.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) } ?? "null"
                    let method = request.firstMatch(of: /"method":"([^"]+)"/).map { String($0.1) } ?? ""
                    guard let reply = reply(method, id) else { break }
                    // All of it, and no SIGPIPE when the client has gone (a test of a refused answer).
                    let answer = Array((reply + "\n").utf8)
                    var offset = 0
                    while offset < answer.count {
                        let sent = answer[offset...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        guard sent > 0 else { break }
                        offset += sent
                    }
                }
            }
        }.start()
    }

    /// The request lines read so far, in order.
    package var requests: [String] { received.lines.withLock { $0 } }
    /// Every request line read so far, one per line.
    package var requestText: String { requests.joined(separator: "\n") }

    deinit { shutdown(listener, Int32(SHUT_RDWR)) }
}
