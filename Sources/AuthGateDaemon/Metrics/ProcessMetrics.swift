import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The standard `process_*` metrics of Prometheus's client libraries, read from `/proc/self`
/// each time the metrics are asked for; written as exposition text (swift-prometheus has
/// none of its own).
enum ProcessMetrics {
    static func exposition() -> String {
        var families: [(name: String, type: String, help: String, value: Double)] = []
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        // /proc/self/stat: the fields after the command's closing parenthesis (proc(5)).
        if let stat = read("/proc/self/stat"), let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // fields[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
            func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
            if let user = field(14), let system = field(15), ticks > 0 {
                families.append(("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", (user + system) / ticks))
            }
            if let start = field(22), ticks > 0, let boot = bootTime() {
                families.append(("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", boot + start / ticks))
            }
            if let virtual = field(23) {
                families.append(("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", virtual))
            }
            if let resident = field(24) {
                families.append(("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", resident * pageSize))
            }
        }
        if let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            families.append(("process_open_fds", "gauge", "Number of open file descriptors.", Double(descriptors.count)))
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            families.append(("process_max_fds", "gauge", "Maximum number of open file descriptors.", Double(limit.rlim_cur)))
        }
        return families.map { "# HELP \($0.name) \($0.help)\n# TYPE \($0.name) \($0.type)\n\($0.name) \(format($0.value))\n" }.joined()
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    private static func read(_ path: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: path))).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The system's boot time in unix seconds (`btime` of /proc/stat).
    private static func bootTime() -> Double? {
        read("/proc/stat")?.split(separator: "\n").first { $0.hasPrefix("btime ") }.flatMap { Double($0.dropFirst(6)) }
    }
}
