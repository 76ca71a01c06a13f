import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A plain HTTP server on 127.0.0.1 (a port of its own), served by one thread: it reads each
/// request (head and a Content-Length body) and writes the bytes `respond` gives for it, then
/// closes; `nil` answers nothing and waits for the client to hang up (a provider that never
/// answers). With `pausingAfter`, an answer's first bytes up to there are written at once and
/// the rest after ``release()`` (or 30 seconds), as an upstream streaming events does. With
/// `answeringAtHead` as well, the answer starts as soon as the request's head has come, and its
/// rest waits for the request's body instead (read and dropped), as an upstream that answers
/// while it reads does. It keeps the requests it read (with `answeringAtHead`, their heads).
final class LoopbackHTTPServer: Sendable {
    let port: Int
    private let listener: Int32
    private let received = Requests()
    private let released = DispatchSemaphore(value: 0)

    private final class Requests: Sendable {
        let lines = Mutex<[String]>([])
    }

    init(pausingAfter pause: Int? = nil, answeringAtHead: Bool = false, respond: @escaping @Sendable (_ request: String) -> [UInt8]?) throws {
        let (socketFD, port) = try Self.listen(backlog: 8)
        listener = socketFD
        self.port = port
        let (received, released) = (received, released)
        Thread {
            // Until deinit shuts the listener down; closed here, after accept has ended.
            defer { close(socketFD) }
            while case let connection = accept(socketFD, nil, nil), connection >= 0 {
                defer { close(connection) }
                guard let request = Self.readRequest(connection, headOnly: answeringAtHead) else { continue }
                received.lines.withLock { $0.append(request) }
                guard let answer = respond(request) else {
                    var byte: UInt8 = 0
                    while read(connection, &byte, 1) > 0 {}
                    continue
                }
                var offset = 0
                while offset < answer.count {
                    if offset == pause {
                        if answeringAtHead { Self.readBody(connection, after: request) } else { _ = released.wait(timeout: .now() + 30) }
                    }
                    let end = pause.map { offset < $0 ? $0 : answer.count } ?? answer.count
                    let sent = answer[offset..<end].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    guard sent > 0 else { break }
                    offset += sent
                }
            }
        }.start()
    }

    /// The requests read so far (head and body), in order.
    var requests: [String] { received.lines.withLock { $0 } }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Lets a paused answer go on.
    func release() { released.signal() }

    deinit {
        released.signal()
        shutdown(listener, Int32(SHUT_RDWR))
    }

    /// A socket listening on 127.0.0.1, on a port the kernel chose, and that port.
    static func listen(backlog: Int32) throws -> (descriptor: Int32, port: Int) {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, length) == 0 && getsockname(socketFD, $0, &length) == 0 }
        }
        guard bound, Glibc.listen(socketFD, backlog) == 0 else {
            close(socketFD)
            throw POSIXError(.EADDRINUSE)
        }
        return (socketFD, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// The Content-Length of a request's head, once it has all come, and where its body starts.
    static func bodyLength(_ bytes: [UInt8]) -> (length: Int, start: Int)? {
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
        let length =
            head.split(separator: "\r\n").compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        return (length, end.upperBound)
    }

    /// Reads (and drops) what is left of the body of `request` (read as far as its head).
    private static func readBody(_ connection: Int32, after request: String) {
        let bytes = Array(request.utf8)
        guard let (length, start) = bodyLength(bytes) else { return }
        var left = length - (bytes.count - start)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while left > 0, case let count = chunk.withUnsafeMutableBytes({ read(connection, $0.baseAddress, min($0.count, left)) }), count > 0 {
            left -= count
        }
    }

    /// A response with `status`, `headers` and `body`, and its Content-Length.
    static func response(_ status: Int, headers: [(String, String)] = [], body: [UInt8] = []) -> [UInt8] {
        var head = "HTTP/1.1 \(status) Status\r\nContent-Length: \(body.count)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    static func readRequest(_ connection: Int32, headOnly: Bool = false) -> String? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let (length, bodyStart) = bodyLength(bytes), headOnly || bytes.count - bodyStart >= length {
                return String(decoding: bytes, as: UTF8.self)
            }
            let count = chunk.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
            guard count > 0 else { return nil }
            bytes += chunk[..<count]
        }
    }
}
