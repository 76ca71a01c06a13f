import AuthGateCore
import Crypto
import FoundationEssentials
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The program a person would recognize behind a caller, which consent asks about and its
/// answers bind to.
///
/// The process at the socket is often not it: `authgate token` run by `deploy.sh` is authgate's
/// own CLI, whose parent is `/bin/bash deploy.sh`; a Python script connects as `python3`. So the
/// caller's parent chain is walked, within the caller's uid: authgate's own executables (the
/// genuine files beside the daemon, by device and inode, not by name) and `sh -c` / `python3 -c`
/// wrappers are passed through; an interpreter running a script file is that script; any other
/// executable is itself.
///
/// What the answers bind to:
/// - "while it runs": this process (pid and start time, so a reused pid is another process) and
///   this program (the executable's device and inode, the script's path), so an `execve` of
///   another program ends it;
/// - "always": the program's path and the SHA-256 of its content, so a file that takes the
///   inode or the path later (an upgrade, a copy of python3) is asked about again. A program
///   with no file of its own (an interactive shell, `python3 -m`) cannot be allowed always: such
///   an answer holds while it runs.
struct ConsentProgram: Sendable, Hashable {
    var pid: Int32
    var startTime: UInt64
    var executableDevice: UInt64
    var executableInode: UInt64
    /// The program's file: the executable's path, or the script's for an interpreter.
    var path: String
    /// The interpreter that runs the script at ``path``; `nil` for an executable.
    var interpreter: String?
    /// SHA-256 of ``path``'s content, hex; `nil` when it has no file of its own to hash.
    var digest: String?
    /// Its command line, escaped and cut (``ConsentKeeper/commandLine(_:)``).
    var commandLine: String
    /// The caller when it is not the program itself (authgate's CLI, a wrapper): its command
    /// line, for the question.
    var through: String?

    /// What a person reads: `deploy.sh (/bin/bash)`, or the executable's path.
    var name: String { interpreter.map { "\(path) (run by \($0))" } ?? path }

    /// The same process still running the same program: what "while it runs" needs.
    func isSameRun(as other: ConsentProgram) -> Bool {
        pid == other.pid && startTime == other.startTime && executableDevice == other.executableDevice
            && executableInode == other.executableInode && path == other.path
    }

    /// How many parents are looked at, at most.
    static let maximumDepth = 8
    /// A script or executable over this size is not hashed (no "always" for it).
    static let maximumHashedSize: Int64 = 512 << 20

    /// Interpreters by their executable's file name: a script they run is the program.
    static func isInterpreter(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let bare = String(name.prefix { !$0.isNumber && $0 != "." && $0 != "-" })
        return [
            "sh", "dash", "bash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "python", "perl", "ruby", "node", "nodejs", "php",
            "lua", "luajit", "tclsh", "wish", "pwsh", "deno", "bun", "julia", "Rscript", "guile", "awk", "gawk", "mawk",
        ].contains(bare)
    }

    /// Service managers and container inits by their executable's file name: what they start
    /// is not theirs to answer for (and an orphan is given to them), so the walk never passes
    /// through to one: "always allow systemd" would cover every program the user's manager
    /// starts, and every one reparented to it.
    static func isServiceManager(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return ["systemd", "init", "tini", "dumb-init", "catatonit", "s6-supervise", "runsv", "supervise"].contains(name)
            || name.hasPrefix("containerd-shim")
    }

    /// The program behind `pid`, whose uid is `uid`; `nil` when the caller itself cannot be read.
    /// - Parameter tools: authgate's own executables (``ToolFiles``), passed through to their
    ///   parent — but for a parent of another uid or a service manager: then authgate's
    ///   executable is the program, and it cannot be allowed always (that would allow every
    ///   program that runs it), only once or while it runs.
    static func find(pid: Int32, uid: UInt32, tools: ToolFiles) -> ConsentProgram? {
        guard var current = ProcessFacts(pid: pid) else { return nil }
        var through: [String] = []
        for _ in 0..<maximumDepth {
            let wraps: Bool
            var script: String?
            if tools.contains(device: current.executableDevice, inode: current.executableInode) {
                wraps = true
            } else if isInterpreter(current.executable) {
                switch scriptArgument(current.arguments) {
                case .inline: wraps = true
                case .file(let file): (wraps, script) = (false, file)
                case .none: wraps = false
                }
            } else {
                wraps = false
            }
            if wraps, current.parent > 1, let parent = ProcessFacts(pid: current.parent), parent.uid == uid, !isServiceManager(parent.executable) {
                through.append(current.commandLine)
                current = parent
                continue
            }
            return program(current, script: script, through: through.first, tools: tools)
        }
        return program(current, script: nil, through: through.first, tools: tools)
    }

    /// - Parameter tools: authgate's own executables, which get no digest, so no "always".
    private static func program(_ facts: ProcessFacts, script: String?, through: String?, tools: ToolFiles) -> ConsentProgram {
        let allowsAlways = !tools.contains(device: facts.executableDevice, inode: facts.executableInode)
        var path = facts.executable
        var interpreter: String?
        var digest: String?
        if let script {
            let resolved = script.hasPrefix("/") ? script : facts.workingDirectory.map { $0 + "/" + script }
            if let resolved, let hash = digestOfScript(resolved, relativeTo: facts.pid, script) {
                (path, interpreter, digest) = (resolved, facts.executable, hash)
            } else {
                // A script that cannot be read is not a file to allow always.
                (path, interpreter) = (resolved ?? script, facts.executable)
            }
        } else if !isInterpreter(facts.executable), allowsAlways {
            digest = digestOfFile("/proc/\(facts.pid)/exe")
        }
        return ConsentProgram(
            pid: facts.pid,
            startTime: facts.startTime,
            executableDevice: facts.executableDevice,
            executableInode: facts.executableInode,
            path: path.escapingControlCharacters,
            interpreter: interpreter?.escapingControlCharacters,
            digest: digest,
            commandLine: facts.commandLine,
            through: through
        )
    }

    enum ScriptArgument: Equatable {
        /// `-c CODE`, `-e CODE`: code on the command line; whoever ran it is the program.
        case inline
        case file(String)
        /// None (an interactive shell), or a module (`-m`): the interpreter itself.
        case none
    }

    /// The script an interpreter's arguments name: the first argument that is not an option.
    static func scriptArgument(_ arguments: [String]) -> ScriptArgument {
        for argument in arguments.dropFirst() {
            if argument == "--" { continue }
            if argument.hasPrefix("-") {
                if ["-c", "-e", "-E", "--eval", "-r"].contains(argument)
                    || (argument.count > 1 && argument.dropFirst().allSatisfy(\.isLetter) && argument.hasSuffix("c"))
                {
                    return .inline
                }
                if argument == "-m" { return .none }
                continue
            }
            return .file(argument)
        }
        return .none
    }

    /// The script's digest, read through the process's own view of it (`/proc/PID/cwd` for a
    /// relative path) so that the daemon reads the file the process named.
    private static func digestOfScript(_ resolved: String, relativeTo pid: Int32, _ script: String) -> String? {
        digestOfFile(script.hasPrefix("/") ? script : "/proc/\(pid)/cwd/\(script)")
    }

    private struct FileVersion: Hashable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int
        var modifiedNanoseconds: Int
        var changed: Int
        var changedNanoseconds: Int
    }

    /// Digests by file version (a file's inode with its size, mtime and ctime, which no user
    /// can set back): a program's executable is read once, not on every question.
    private static let digests = Mutex<[FileVersion: String]>([:])

    /// SHA-256 of a regular file, opened without blocking (a FIFO named as a script must not
    /// hold the daemon) and read up to ``maximumHashedSize``; `nil` for anything else.
    static func digestOfFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let status = try? FileDescriptor(rawValue: fd).stat(), status.type == .regular, status.size <= maximumHashedSize else {
            return nil
        }
        let version = FileVersion(
            device: UInt64(status.deviceID.rawValue),
            inode: UInt64(status.inode.rawValue),
            size: status.size,
            modified: status.st_mtim.tv_sec,
            modifiedNanoseconds: status.st_mtim.tv_nsec,
            changed: status.st_ctim.tv_sec,
            changedNanoseconds: status.st_ctim.tv_nsec
        )
        if let known = digests.withLock({ $0[version] }) { return known }
        let hex = Array("0123456789abcdef")
        var hasher = SHA256()
        var chunk = [UInt8](repeating: 0, count: 256 * 1024)
        let file = FileDescriptor(rawValue: fd)
        while true {
            guard let count = try? chunk.withUnsafeMutableBytes({ try file.read(into: $0) }) else { return nil }
            if count == 0 { break }
            hasher.update(data: chunk[0..<count])
        }
        let digest = String(hasher.finalize().flatMap { byte in [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]] })
        digests.withLock { known in
            if known.count >= 256 { known.removeAll() }
            known[version] = digest
        }
        return digest
    }
}

/// authgate's own executables, which the consent question looks through to the program that
/// ran them: the genuine files (device and inode) of the daemon's own executable and of the
/// `authgate` CLI beside it, as they were when the daemon started.
struct ToolFiles: Sendable {
    private let identities: Set<[UInt64]>

    init(identities: Set<[UInt64]>) { self.identities = identities }

    /// The daemon's own executable and `authgate` in its directory.
    static func besideDaemon() -> ToolFiles {
        var identities: Set<[UInt64]> = []
        var buffer = [CChar](repeating: 0, count: 4097)
        let length = readlink("/proc/self/exe", &buffer, 4096)
        var paths = ["/proc/self/exe"]
        if length > 0 {
            let own = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let slash = own.lastIndex(of: "/") { paths.append(String(own[..<slash]) + "/authgate") }
        }
        for path in paths {
            if let status = try? FilePath(path).stat(), status.type == .regular {
                identities.insert([UInt64(status.deviceID.rawValue), UInt64(status.inode.rawValue)])
            }
        }
        return ToolFiles(identities: identities)
    }

    func contains(device: UInt64, inode: UInt64) -> Bool { identities.contains([device, inode]) }
}

/// What /proc says of one process, for ``ConsentProgram``.
struct ProcessFacts {
    var pid: Int32
    var parent: Int32
    /// The real uid.
    var uid: UInt32
    var startTime: UInt64
    var executable: String
    var executableDevice: UInt64
    var executableInode: UInt64
    var arguments: [String]
    var commandLine: String
    var workingDirectory: String?

    init?(pid: Int32) {
        guard pid > 0, let stat = Self.read("/proc/\(pid)/stat", limit: 4096), let status = Self.read("/proc/\(pid)/status", limit: 64 * 1024) else {
            return nil
        }
        // Fields after the command name (which may hold spaces and parentheses): state, ppid, …
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
        guard fields.count > 19, let parent = Int32(fields[1]), let startTime = UInt64(fields[19]) else { return nil }
        let uidLine = String(decoding: status, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("Uid:") }
        guard let uid = uidLine?.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap({ UInt32($0) }) else { return nil }
        var device: UInt64 = 0
        var inode: UInt64 = 0
        guard let identity = try? FilePath("/proc/\(pid)/exe").stat() else { return nil }
        device = UInt64(identity.deviceID.rawValue)
        inode = UInt64(identity.inode.rawValue)
        let cmdline = Self.read("/proc/\(pid)/cmdline", limit: 64 * 1024) ?? []
        var arguments = cmdline.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        if arguments.last == "" { arguments.removeLast() }
        self.pid = pid
        self.parent = parent
        self.uid = uid
        self.startTime = startTime
        executable = Self.link("/proc/\(pid)/exe") ?? "?"
        executableDevice = device
        executableInode = inode
        self.arguments = arguments
        commandLine = ConsentKeeper.commandLine(pid)
        workingDirectory = Self.link("/proc/\(pid)/cwd")
    }

    private static func read(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        return StorageFiles.readAll(fd, limit: limit)
    }

    private static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let length = readlink(path, &buffer, 4096)
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
