import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A daemon of one connection on a Unix socket: it reads one request line (kept in `request`)
/// and answers `reply` with the request's id.
package final class OneAnswerDaemon: Sendable {
    package let path: String
    /// The request line it read.
    package let request = SharedText()
    private let listener: Int32

    package init(in directory: String, reply: @escaping @Sendable (_ id: String) -> String) throws {
        path = directory + "/s.sock"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        let socketFD = listener
        let received = request
        Thread {
            let connection = accept(socketFD, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(connection, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
            received.append(Data(line))
            let request = String(decoding: line, as: UTF8.self)
            let id = request.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) } ?? "null"
            let answer = Array((reply(id) + "\n").utf8)
            _ = answer.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
        }.start()
    }

    deinit { close(listener) }
}
