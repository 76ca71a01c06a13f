import CLinux
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension AuthGateBench {
    // MARK: Memory after a burst

    /// Whether the daemon gives back a burst's memory: 200 connections of one uid pipelining `token` lines
    /// for 8 s and never reading, then closed; the daemon's RSS idle before, at the peak, and
    /// once it is idle again (its CPU time still for a second, then the trim's delay).
    func memoryAfterBurst(_ work: WorkDirectory) throws -> String {
        let daemon = try BenchDaemon(
            binary: binDirectory + "/authgated",
            work: work,
            name: "burst",
            providers: ["mock.json": Self.mockProvider],
            arguments: ["--max-connections", "512"]
        )
        try daemon.signIn()
        usleep(500_000)
        let before = daemon.residentKiB
        var descriptors: [Int32] = []
        for _ in 0..<200 {
            let descriptor = Array(daemon.socketPath.utf8).withUnsafeBufferPointer { path in
                path.withMemoryRebound(to: CChar.self) { ag_connect_unix($0.baseAddress, $0.count) }
            }
            guard descriptor >= 0 else { throw BenchError("cannot connect to \(daemon.socketPath): \(String(cString: strerror(errno)))") }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            descriptors.append(descriptor)
        }
        let lines = Array(String(repeating: Self.tokenRequest + "\n", count: 64).utf8)
        var peak = before
        let end = Date().addingTimeInterval(8)
        while Date() < end {
            for descriptor in descriptors {
                _ = lines.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            }
            usleep(10_000)
            let now = daemon.residentKiB
            if now.total > peak.total { peak = now }
        }
        for descriptor in descriptors { close(descriptor) }
        // Idle: the daemon's CPU time unchanged for a second (at most 30 s), then past the trim.
        var cpu = daemon.cpuTicks
        for _ in 0..<30 {
            sleep(1)
            let next = daemon.cpuTicks
            if next == cpu { break }
            cpu = next
        }
        usleep(1_500_000)
        let after = daemon.residentKiB
        daemon.stop()
        let rows = [
            ["idle, signed in", mebibytes(before.total), mebibytes(before.anonymous)],
            ["peak of the burst", mebibytes(peak.total), mebibytes(peak.anonymous)],
            ["idle again", mebibytes(after.total), mebibytes(after.anonymous)],
        ]
        return "### Memory after a burst\n\n"
            + "200 connections of one uid pipelining `token` lines for 8 s without reading, then closed.\n\n"
            + table(["state", "VmRSS MiB", "of it anonymous (RssAnon) MiB"], rows)
            + "\nKept after the burst: \(mebibytes(after.total - before.total)) MiB.\n"
    }
}

extension BenchDaemon {
    /// The daemon's user and system CPU time, in clock ticks (/proc/PID/stat).
    var cpuTicks: Int {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        guard fields.count > 13 else { return 0 }
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }
}
