#if canImport(Glibc)
import Glibc
#endif

/// This process's environment variables, read one at a time with `getenv`.
///
/// Foundation's `ProcessInfo.processInfo.environment` builds a dictionary of every variable
/// (splitting each `NAME=value` by characters) on every access: it was a third of the
/// instructions of `authgate token` and of the credential helpers, which git, docker and
/// kubectl run before each request (docs/BENCHMARKS.md, "Credential helpers as whole
/// processes"). Code that reads a few variables in such a process reads them here.
public enum ProcessEnvironment {
    /// The value of `name`, `nil` when it is not set.
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
