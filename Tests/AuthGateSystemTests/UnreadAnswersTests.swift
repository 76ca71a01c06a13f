import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Crypto
import Foundation
import Logging
import Testing

@testable import AuthGateOAuth

#if canImport(Glibc)
import Glibc
#endif

/// Answers a client never reads: what they cost the daemon, and that it is given back. A suite
/// of its own: it takes the daemon seconds of CPU, and the test shards are filled suite by suite.
@Suite("Unread answers: memory bounded and given back", .serialized)
struct UnreadAnswersTests {
    // MARK: Memory held by unread answers

    /// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
    private static func memory(_ pid: Int32, _ field: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix(field + ":") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    @Test("60 connections pipelining token lines and never reading cost the daemon a few MiB, given back when they close")
    func unreadAnswersAreBounded() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "notice")
        let connection = try daemon.connect()
        _ = try exchange(connection, Providers.mockLogin)
        // Warm the NIO path (two lines in one read are handed on) and the cached answers.
        try connection.send(Array((#"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"# + "\n").utf8) + Array("\n".utf8))
        _ = try connection.receiveLine()
        let before = try Self.memory(daemon.pid, "VmRSS")

        let line = Array((#"{"jsonrpc":"2.0","id":3,"method":"token","params":{"provider":"mock"}}"# + "\n").utf8)
        let chunk = Array(Array(repeating: line, count: 65_536 / line.count).joined())
        var attackers: [Int32] = []
        defer { for item in attackers { close(item) } }
        for _ in 0..<60 {
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { path in
                for (index, byte) in daemon.socketPath.utf8.enumerated() { path[index] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(connected == 0)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            attackers.append(descriptor)
        }
        // Each sends until the daemon stops taking its lines (or 4 MiB went through).
        var sent = [Int](repeating: 0, count: attackers.count)
        var stalled = Set<Int>()
        try eventually(timeout: .seconds(60)) {
            for (index, descriptor) in attackers.enumerated() where !stalled.contains(index) {
                while sent[index] < 4 << 20 {
                    let count = chunk.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if count <= 0 { break }
                    sent[index] += count
                }
                if sent[index] >= 4 << 20 || errno == EAGAIN { stalled.insert(index) }
            }
            return stalled.count == attackers.count
        }
        // The kernel took what it could at once; the daemon works through it until it has answered
        // all it will for clients that do not read: until its CPU time stands still.
        var cpu = try Self.cpuTicks(daemon.pid)
        var stillSince = ContinuousClock.now
        try eventually(timeout: .seconds(90)) {
            let now = try Self.cpuTicks(daemon.pid)
            if now != cpu { (cpu, stillSince) = (now, .now) }
            return ContinuousClock.now - stillSince > .milliseconds(500)
        }
        let during = try Self.memory(daemon.pid, "VmRSS")
        let peak = try Self.memory(daemon.pid, "VmHWM")
        #expect(sent.allSatisfy { $0 < 4 << 20 }, "the daemon stopped reading every connection")
        #expect(peak - before < 24 * 1024, "RSS \(before) KiB before, \(during) KiB during, \(peak) KiB at its peak")

        for item in attackers { close(item) }
        attackers = []
        try eventually(timeout: .seconds(60)) { try Self.memory(daemon.pid, "VmRSS") - before < 16 * 1024 }
        #expect(accessToken(try exchange(connection, #"{"jsonrpc":"2.0","id":4,"method":"token","params":{"provider":"mock"}}"#)) != nil)
    }

    /// The process's user and system CPU time, in clock ticks (/proc/PID/stat).
    private static func cpuTicks(_ pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        return try #require(Int(fields[11])) + #require(Int(fields[12]))
    }

    private func accessToken(_ reply: [String: Any]) -> String? { (reply.result as? [String: Any])?["access_token"] as? String }
}
