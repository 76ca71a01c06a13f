import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon does to itself at start-up so that its memory — full of tokens — stays in it.
enum ProcessHardening {
    /// - No core dumps (`RLIMIT_CORE` 0), and not dumpable (`PR_SET_DUMPABLE` 0): no core file,
    ///   and other processes of the same uid cannot ptrace it or read its `/proc/PID/mem`.
    /// - The descriptor limit raised to its hard limit: each client connection costs one.
    /// - Returns: What could not be done, for the log.
    static func apply() -> [String] {
        var problems: [String] = []
        if ag_disable_core_dumps() != 0 {
            problems.append("cannot disable core dumps: \(String(cString: strerror(errno)))")
        }
        if ag_set_not_dumpable() != 0 {
            problems.append("cannot make the process non-dumpable: \(String(cString: strerror(errno)))")
        }
        _ = ag_raise_descriptor_limit()
        return problems
    }
}
