import AuthGateCore
import AuthGateServer
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Decides whether a caller may use a provider, from its `access` rules and the caller's
/// peer credentials.
///
/// Each list that is present must admit the caller: `users` by user name (or numeric uid),
/// `groups` by any of the uid's groups (primary or supplementary, from the group database),
/// `executables` by the program the caller ran when it connected (``ProcessIdentity``: the
/// same file, by device and inode), and only while its pid still names that process running
/// that program. This rule tells programs of one uid apart; it is no boundary against code
/// running as that uid, which can hand its socket to another process (docs/SECURITY.md).
struct AccessPolicy: Sendable {
    func admits(_ caller: PeerCredentials, _ rules: AccessRules) -> Bool {
        if rules.admitsEveryone { return true }
        let name = Self.userName(uid: caller.uid)
        if let users = rules.users {
            guard users.contains(where: { $0 == name || $0 == String(caller.uid) }) else { return false }
        }
        if let groups = rules.groups {
            let callerGroups = Self.groupIDs(userName: name, primary: caller.gid)
            let allowed = Set(groups.compactMap(SystemGroups.id(named:)))
            guard !callerGroups.isDisjoint(with: allowed) else { return false }
        }
        if let executables = rules.executables {
            // Pinned at accept time; refused when the pid now names another process (it exited
            // and the pid was reused) or the same process runs another program (it exec'd after
            // connecting, leaving the socket to a child, say).
            guard let pinned = caller.process, ProcessIdentity(pid: caller.pid) == pinned,
                executables.contains(where: pinned.runs)
            else { return false }
        }
        return true
    }

    /// Whether the `users` and `groups` rules admit `uid` (with its primary group from the
    /// user database): what a reload asks of every session's owner, with no connection to look
    /// at. `executables` is left out: it names programs, not people, and every call is checked
    /// against it anyway.
    func admitsUser(uid: UInt32, _ rules: AccessRules) -> Bool {
        var narrowed = rules
        narrowed.executables = nil
        return admits(PeerCredentials(pid: 0, uid: uid, gid: Self.primaryGroupID(uid: uid) ?? UInt32.max), narrowed)
    }

    /// Root, the daemon's own user (a user-mode daemon belongs to its user), and members of
    /// `adminGroup` administer the daemon. They may reload and list all sessions; they never read others' tokens.
    func isAdmin(_ caller: PeerCredentials, adminGroup: String) -> Bool {
        if caller.uid == 0 || caller.uid == geteuid() { return true }
        guard let admins = SystemGroups.id(named: adminGroup) else { return false }
        return Self.groupIDs(userName: Self.userName(uid: caller.uid), primary: caller.gid).contains(admins)
    }

    static func userName(uid: UInt32) -> String? { account(uid: uid)?.name }

    static func primaryGroupID(uid: UInt32) -> UInt32? { account(uid: uid)?.gid }

    /// The user database's entry of `uid`: its name and primary group.
    private static func account(uid: UInt32) -> (name: String, gid: UInt32)? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return (String(cString: entry.pw_name), entry.pw_gid)
    }

    static func groupIDs(userName: String?, primary: UInt32) -> Set<UInt32> {
        guard let userName else { return [primary] }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(userName, primary, &groups, &count) == -1 {
            groups = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(userName, primary, &groups, &count)
        }
        return Set(groups.prefix(Int(max(count, 0)))).union([primary])
    }
}
