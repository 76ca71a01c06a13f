import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a connection, as the kernel says (`SO_PEERCRED`).
///
/// This is what the daemon trusts to tell users apart: sessions are keyed by `uid`, and
/// access rules look at the uid, its groups and the executable behind `pid`.
package struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
    /// The connecting process as it was when the connection was accepted: `access.executables`
    /// is checked against it, and refused once the pid names another process or another program.
    package var process: ProcessIdentity?
    /// Root, or the daemon's own user, unless the daemon administers nobody (`--no-admin`, as the
    /// Kubernetes node agent runs, whose callers may well run as uid 0): see ``isUnbounded``.
    package var isExempt: Bool

    package init(pid: Int32, uid: UInt32, gid: UInt32, process: ProcessIdentity? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.process = process
        isExempt = uid == 0 || uid == geteuid()
    }

    package var description: String { "uid=\(uid) gid=\(gid) pid=\(pid)" }

    /// Root, or the daemon's own user: not bound by the per-user shares (connections, sessions,
    /// provider requests, first sign-ins), which protect users from each other. A daemon that
    /// administers nobody binds them too (``ConnectionLimits/exemptsAdministrators``).
    package var isUnbounded: Bool { isExempt }

    /// The process's name as the kernel keeps it (`/proc/PID/comm`, at most 15 bytes), escaped
    /// for a log line; `nil` when the process is gone.
    package var programName: String? {
        let file = fopen("/proc/\(pid)/comm", "r")
        guard let file else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 32)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 && $0 != 0x0A }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }.joined()
    }

    /// The peer of a connected Unix socket, or `nil` when the kernel does not say.
    /// - Parameter pinProcess: Whether to pin the process too (``process``), which costs /proc
    ///   reads on every connection and matters only to `access.executables` rules.
    package init?(socket descriptor: Int32, pinProcess: Bool) {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard ag_peer_credentials(descriptor, &pid, &uid, &gid) == 0 else { return nil }
        self.init(pid: pid, uid: uid, gid: gid, process: pinProcess ? ProcessIdentity(pid: pid) : nil)
    }
}

/// One process and the program it runs: its pid's start time (so a reused pid is another
/// process) and the device and inode of its executable (so an `exec` of another program, or
/// another file put at the program's path, is another program). Read from /proc when a
/// connection is accepted, and again when a request needs `access.executables`.
package struct ProcessIdentity: Sendable, Hashable {
    package var startTime: UInt64
    package var executableDevice: UInt64
    package var executableInode: UInt64

    /// `nil` when /proc does not tell (the process is gone, or /proc is hidden from the daemon).
    package init?(pid: Int32) {
        let startTime = ag_process_start_time(pid)
        var device: UInt64 = 0
        var inode: UInt64 = 0
        guard startTime != 0, ag_file_identity("/proc/\(pid)/exe", &device, &inode) == 0 else { return nil }
        self.init(startTime: startTime, executableDevice: device, executableInode: inode)
    }

    package init(startTime: UInt64, executableDevice: UInt64, executableInode: UInt64) {
        self.startTime = startTime
        self.executableDevice = executableDevice
        self.executableInode = executableInode
    }

    /// Whether the file at `path` is this process's program.
    package func runs(_ path: String) -> Bool {
        var device: UInt64 = 0
        var inode: UInt64 = 0
        return ag_file_identity(path, &device, &inode) == 0 && device == executableDevice && inode == executableInode
    }
}
