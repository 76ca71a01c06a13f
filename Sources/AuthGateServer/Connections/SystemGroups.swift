#if canImport(Glibc)
import Glibc
#endif

/// The system's groups, by name or number: the socket's group (`--socket-group`), and the
/// daemon's access rules and admin group.
package enum SystemGroups {
    /// The id of the group `name` (or `name` itself when it is a number); `nil` when there is none.
    package static func id(named name: String) -> UInt32? {
        if let numeric = UInt32(name) { return numeric }
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }
}
