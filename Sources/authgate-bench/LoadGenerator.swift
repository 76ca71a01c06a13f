import CLinux
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Latencies of one load run and what they add up to.
struct LoadResult {
    var requests: Int
    var errors: Int
    var seconds: Double
    /// Sorted, in nanoseconds.
    var latencies: [UInt64]

    var requestsPerSecond: Double { Double(requests) / seconds }

    /// The `fraction` quantile (0.5, 0.99) in microseconds.
    func percentile(_ fraction: Double) -> Double {
        guard !latencies.isEmpty else { return .nan }
        let index = min(latencies.count - 1, Int((Double(latencies.count) * fraction).rounded(.up)) - 1)
        return Double(latencies[max(0, index)]) / 1000
    }
}

/// Drives a Unix-socket line server with `clients` threads, each sending one request line and
/// waiting for its answer, again and again, for `duration`.
///
/// Kept as cheap as a client can be, so that it measures the server and not itself: raw
/// descriptors, one reusable receive buffer per thread, nothing parsed but the newline (an
/// answer is counted an error when it carries `"error"`). Its own ceiling is measured against
/// ``TrivialServer``, which answers without doing anything.
struct LoadGenerator {
    enum Mode: String {
        /// Connect, send one request, read its answer, close.
        case connectionPerRequest = "connection per request"
        /// One connection per client for the whole run.
        case keepAlive = "keep-alive"
    }

    let socketPath: String
    let request: [UInt8]

    init(socketPath: String, requestLine: String) {
        self.socketPath = socketPath
        request = Array((requestLine + "\n").utf8)
    }

    func run(clients: Int, mode: Mode, duration: Double) -> LoadResult {
        let results = Mutex<[(latencies: [UInt64], errors: Int)]>([])
        let done = DispatchGroup()
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(duration * 1e9)
        for _ in 0..<clients {
            done.enter()
            let thread = Thread {
                let outcome = self.client(mode: mode, until: deadline)
                results.withLock { $0.append(outcome) }
                done.leave()
            }
            thread.stackSize = 256 * 1024
            thread.start()
        }
        done.wait()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let all = results.withLock { $0 }
        let latencies = all.flatMap(\.latencies).sorted()
        return LoadResult(requests: latencies.count, errors: all.map(\.errors).reduce(0, +), seconds: elapsed, latencies: latencies)
    }

    private func client(mode: Mode, until deadline: UInt64) -> (latencies: [UInt64], errors: Int) {
        var latencies: [UInt64] = []
        latencies.reserveCapacity(200_000)
        var errors = 0
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let path = Array(socketPath.utf8)
        var descriptor: Int32 = -1
        defer { if descriptor >= 0 { close(descriptor) } }
        while true {
            let began = DispatchTime.now().uptimeNanoseconds
            if began >= deadline { break }
            if descriptor < 0 {
                descriptor = path.withUnsafeBufferPointer { path in
                    path.withMemoryRebound(to: CChar.self) { ag_connect_unix($0.baseAddress, $0.count) }
                }
                if descriptor < 0 {
                    errors += 1
                    usleep(1000)
                    continue
                }
            }
            guard exchange(descriptor, &buffer, &errors) else {
                close(descriptor)
                descriptor = -1
                errors += 1
                continue
            }
            latencies.append(DispatchTime.now().uptimeNanoseconds - began)
            if mode == .connectionPerRequest {
                close(descriptor)
                descriptor = -1
            }
        }
        return (latencies, errors)
    }

    /// Sends the request and reads up to the answer's newline. False when the connection broke.
    private func exchange(_ descriptor: Int32, _ buffer: inout [UInt8], _ errors: inout Int) -> Bool {
        let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else { return false }
        var received = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { raw in
                recv(descriptor, raw.baseAddress! + received, raw.count - received, 0)
            }
            guard count > 0 else { return false }
            let end = received + count
            if buffer[end - 1] == UInt8(ascii: "\n") {
                // `"error":` appears only in an error answer (tokens are base64url, no quotes).
                if buffer[0..<end].firstRange(of: Array(#""error":"#.utf8)) != nil { errors += 1 }
                return true
            }
            received = end
            guard received < buffer.count else { return false }
        }
    }
}

/// A server that answers every line with a fixed line and does nothing else: the load
/// generator's own ceiling. One thread per connection, from a pool that accepts in turn.
final class TrivialServer: Sendable {
    let socketPath: String
    private let listener: Int32

    init(socketPath: String, workers: Int, answer: String) throws {
        self.socketPath = socketPath
        unlink(socketPath)
        let path = Array(socketPath.utf8)
        listener = path.withUnsafeBufferPointer { path in
            path.withMemoryRebound(to: CChar.self) { ag_bind_unix($0.baseAddress, $0.count, Int32(SOCK_STREAM.rawValue), 1024) }
        }
        guard listener >= 0 else { throw BenchError("cannot listen on \(socketPath): \(String(cString: strerror(errno)))") }
        let reply = Array((answer + "\n").utf8)
        for _ in 0..<workers {
            let listener = listener
            let thread = Thread {
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                while true {
                    let connection = accept(listener, nil, nil)
                    guard connection >= 0 else { return }
                    Self.serve(connection, reply: reply, buffer: &buffer)
                    close(connection)
                }
            }
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }

    private static func serve(_ connection: Int32, reply: [UInt8], buffer: inout [UInt8]) {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            let lines = buffer[0..<count].count { $0 == UInt8(ascii: "\n") }
            for _ in 0..<lines {
                guard reply.withUnsafeBytes({ send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == reply.count else { return }
            }
        }
    }

    /// Stops accepting; the worker threads end with the process.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(socketPath)
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
