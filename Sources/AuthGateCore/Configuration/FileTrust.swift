import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// sshd's `StrictModes` for the files the daemon trusts: provider files and their directory,
/// client secret files and CA files.
///
/// Anyone who can write one of them can send the daemon's users to an identity provider of
/// their choosing, or read a client secret; so such a file is refused with a sentence naming
/// it, instead of being used. A file must be owned by root or by the daemon's own user, and
/// writable by nobody else; a secret file must not be readable by everyone either.
public enum FileTrust {
    /// What the file is to the daemon.
    public enum Kind: Sendable {
        case providerFile
        case providersDirectory
        case secret
        case certificate
        /// A file the CLI writes a token into (`authgate sink`).
        case tokenFile
        /// A template the sink fills with the token (`authgate sink --template`).
        case template
        /// A platform's short-lived JWT (`client_assertion_file`, `assertion_file`,
        /// `subject_token_file`): kubelet writes projected tokens readable by all (0644), so
        /// only the owner and not-writable rules apply.
        case workloadToken

        var noun: String {
            switch self {
            case .providerFile: "provider file"
            case .providersDirectory: "providers directory"
            case .secret: "secret file"
            case .certificate: "CA file"
            case .tokenFile: "token file"
            case .template: "template"
            case .workloadToken: "workload token file"
            }
        }
    }

    /// Root and the user the daemon runs as.
    public static var trustedOwners: Set<UInt32> { [0, UInt32(geteuid())] }

    /// Why `path` (symbolic links followed) must not be trusted, or `nil` when it may be.
    /// A file that does not exist is not this check's business (`nil`): reading it fails on its own.
    public static func problem(with path: String, as kind: Kind, owners: Set<UInt32> = trustedOwners) -> String? {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved),
            let mode = integer(attributes[.posixPermissions]).map({ UInt16(truncatingIfNeeded: $0) }),
            let owner = integer(attributes[.ownerAccountID]).map({ UInt32(truncatingIfNeeded: $0) })
        else { return nil }
        return problem(path: path, kind: kind, owner: owner, mode: mode, owners: owners)
    }

    /// Reads a file the daemon trusts — the one rule for every file it reads on an
    /// administrator's word (provider files, client secrets and keys, CA files, workload tokens).
    ///
    /// The path is walked from `/` one component at a time (``openDirectory(of:as:owners:creating:)``):
    /// every directory on the way must be owned by root or the daemon's user and writable by
    /// nobody else (or be root's and sticky, like /tmp), checked by `fstat` on the descriptor
    /// just opened. A symbolic link — on the way or the file itself — is followed only when root
    /// or the daemon's user owns the link (it sits in a directory that passed, so nobody else
    /// can have put it there), and its target is walked the same way; one anybody else owns is
    /// refused before anything it points at is looked at, with a sentence that names the link
    /// only, so the answer says nothing of the target. The file is opened relative to its
    /// directory with `O_NOFOLLOW`, and its owner, mode, type and size are taken from `fstat`
    /// of that descriptor. Nothing is reopened by path afterwards, so a file swapped after the
    /// check is never the one used.
    /// - Parameter followsLink: Whether the file itself may be such a link; a path a user names
    ///   for their own command (`authgate sink --template`, which may run as root) must name the
    ///   file itself.
    /// - Returns: The bytes, or a sentence saying why the file is not used.
    public static func read(
        _ path: String,
        as kind: Kind,
        maximumSize: Int,
        owners: Set<UInt32> = trustedOwners,
        followsLink: Bool = true
    ) -> Result<[UInt8], FileTrustProblem> {
        var target = path
        for _ in 0..<40 {
            let directory: TrustedDirectory
            switch openDirectory(of: target, as: kind, owners: owners) {
            case .success(let opened): directory = opened
            case .failure(let problem): return .failure(problem.naming(path, for: target))
            }
            defer { close(directory.descriptor) }
            var info = stat()
            guard fstatat(directory.descriptor, directory.name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
            }
            guard info.st_mode & S_IFMT == S_IFLNK else {
                let descriptor = openat(directory.descriptor, directory.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
                return readOpened(
                    descriptor,
                    path: path,
                    kind: kind,
                    maximumSize: maximumSize,
                    owners: owners,
                    refusesHardLinks: directory.othersMayAdd
                )
            }
            let link = (directory.path == "/" ? "" : directory.path) + "/" + directory.name
            guard followsLink else {
                return .failure(FileTrustProblem("the \(kind.noun) \(path) is a symbolic link; name the file itself", refused: true))
            }
            guard owners.contains(info.st_uid) else {
                return .failure(
                    FileTrustProblem(
                        "the \(kind.noun) \(path) is a symbolic link (\(link)) owned by uid \(info.st_uid): only one of root's or the daemon's user's is followed",
                        refused: true
                    )
                )
            }
            guard let next = readLink(directory.descriptor, directory.name), !next.isEmpty else {
                return .failure(FileTrustProblem("cannot follow the symbolic link \(link) of the \(kind.noun) \(path)", refused: false))
            }
            target = next.hasPrefix("/") ? next : (directory.path == "/" ? "" : directory.path) + "/" + next
        }
        return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): too many symbolic links", refused: false))
    }

    /// Reads a file a user named for their own command (not one the daemon trusts, so no owner
    /// rule): opened with `O_NOFOLLOW|O_NONBLOCK`, a regular file (no link, FIFO or device) of at
    /// most `maximumSize` bytes (`authgate provider add --initial-access-token-file`).
    public static func readRegularFile(_ path: String, as kind: Kind, maximumSize: Int) -> Result<[UInt8], FileTrustProblem> {
        readOpened(open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK), path: path, kind: kind, maximumSize: maximumSize, owners: nil)
    }

    /// The checks on an opened file (`fstat`: a regular file, the owner and mode rules unless
    /// `owners` is nil, the size) and its bytes; closes `descriptor`.
    /// - Parameter refusesHardLinks: In a directory others may add names to (root's sticky
    ///   /tmp): a file with a second name may be another user's hard link to a root-only file,
    ///   which passes the owner rule (where the kernel's `protected_hardlinks` is off).
    private static func readOpened(
        _ descriptor: Int32,
        path: String,
        kind: Kind,
        maximumSize: Int,
        owners: Set<UInt32>?,
        refusesHardLinks: Bool = false
    ) -> Result<[UInt8], FileTrustProblem> {
        guard descriptor >= 0 else {
            return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(FileTrustProblem("the \(kind.noun) \(path) is not a regular file", refused: false)) }
        if refusesHardLinks, info.st_nlink > 1 {
            return .failure(
                FileTrustProblem(
                    "the \(kind.noun) \(path) has \(info.st_nlink) names (hard links) in a directory any user may add to: another user may have linked it there; copy it instead",
                    refused: true
                )
            )
        }
        if let owners, let problem = problem(path: path, kind: kind, owner: info.st_uid, mode: UInt16(truncatingIfNeeded: info.st_mode), owners: owners) {
            return .failure(FileTrustProblem(problem, refused: true))
        }
        guard Int(info.st_size) <= maximumSize else {
            return .failure(FileTrustProblem("the \(kind.noun) \(path) is \(info.st_size) bytes; the limit is \(maximumSize)", refused: false))
        }
        var bytes = [UInt8](repeating: 0, count: maximumSize + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if read < 0, errno == EINTR { continue }
            guard read >= 0 else {
                return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
            }
            if read == 0 { break }
            count += read
        }
        guard count <= maximumSize else {
            return .failure(FileTrustProblem("the \(kind.noun) \(path) grew past \(maximumSize) bytes while it was read", refused: false))
        }
        return .success(Array(bytes.prefix(count)))
    }

    /// The first directory above `real` (a resolved path) that others could change entries of.
    private static func directoryProblem(above real: String, path: String, kind: Kind, owners: Set<UInt32>) -> FileTrustProblem? {
        var directory = real
        while let slash = directory.lastIndex(of: "/") {
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
            var info = stat()
            guard lstat(directory, &info) == 0 else {
                return FileTrustProblem("cannot check the directory \(directory) of the \(kind.noun) \(path)", refused: false)
            }
            if let problem = untrustedDirectory(
                directory,
                owner: info.st_uid,
                mode: UInt16(truncatingIfNeeded: info.st_mode),
                path: path,
                kind: kind,
                owners: owners
            ) {
                return problem
            }
            if directory == "/" { break }
        }
        return nil
    }

    /// The rule for a directory above a trusted file: owned by root or `owners`, and writable
    /// by nobody else, unless it is root's and sticky (/tmp), where others may add entries but
    /// not replace ours.
    private static func untrustedDirectory(
        _ directory: String,
        owner: uid_t,
        mode: UInt16,
        path: String,
        kind: Kind,
        owners: Set<UInt32>
    ) -> FileTrustProblem? {
        let sticky = mode & UInt16(S_ISVTX) != 0
        guard !(owners.contains(owner) && (mode & 0o022 == 0 || (sticky && owner == 0))) else { return nil }
        let why =
            owners.contains(owner)
            ? "is writable by \(mode & 0o002 != 0 ? "everyone" : "its group") (mode 0\(String(mode & 0o7777, radix: 8)))"
            : "is owned by uid \(owner)"
        return FileTrustProblem("the directory \(directory) above the \(kind.noun) \(path) \(why): others could replace the file", refused: true)
    }

    /// Opens the directory a file is to be written in, for a writer that must not be led
    /// elsewhere (`authgate sink`, which may run as root): the path is walked from `/` (a
    /// relative one from the working directory, whose path the kernel gives) one component at a
    /// time with `openat(O_NOFOLLOW)`, and every directory on the way, the file's own included,
    /// must pass the rule ``read(_:as:maximumSize:owners:)`` applies to the directories above a
    /// trusted file, checked by `fstat` on the descriptor just opened. A symbolic link on the
    /// way is followed (its target walked the same way) only when root or the caller owns it,
    /// as the kernel's `protected_symlinks` does in sticky directories: one another user
    /// planted is refused. The caller creates, renames and removes the file relative to the
    /// descriptor, so a link swapped in later cannot redirect it.
    /// - Parameters:
    ///   - path: The file's path, as the user gave it; it names a file, not a directory.
    ///   - kind: What the file is, for the sentences.
    ///   - owners: Who may own the directories (root and the caller by default).
    ///   - creating: Whether a missing directory is made (`authgate sink --mkdir`): only where
    ///     the walk has reached, with `mkdirat` in the checked directory, then opened with
    ///     `O_NOFOLLOW` and given its group and mode by `fchown`/`fchmod` on that descriptor —
    ///     nothing by path, so a path that is refused makes no directory, and a link swapped in
    ///     after `mkdirat` is never followed or re-owned.
    /// - Returns: The open directory and the file's name in it, or why it is not used.
    public static func openDirectory(
        of path: String,
        as kind: Kind,
        owners: Set<UInt32> = trustedOwners,
        creating: DirectoryCreation? = nil
    )
        -> Result<TrustedDirectory, FileTrustProblem>
    {
        var absolute = path
        if !path.hasPrefix("/") {
            guard let cwd = getcwd(nil, 0) else {
                return .failure(FileTrustProblem("cannot find the working directory for the \(kind.noun) \(path)", refused: false))
            }
            absolute = String(cString: cwd) + "/" + path
            free(cwd)
        }
        let components = absolute.split(separator: "/", omittingEmptySubsequences: true)
        guard !absolute.hasSuffix("/"), let name = components.last, name != ".", name != ".." else {
            return .failure(FileTrustProblem("the \(kind.noun) \(path) does not name a file", refused: false))
        }
        // Directories still to walk, the next one last; a link's target is pushed in its place.
        var pending = Array(components.dropLast().reversed())
        var walked: [Substring] = []  // where the walk is, for the sentences
        var shown: String { "/" + walked.joined(separator: "/") }
        var current: Int32 = -1
        defer { if current >= 0 { close(current) } }

        /// Makes `descriptor` (just opened) the walk's directory once it passes the rule.
        func enter(_ descriptor: Int32) -> FileTrustProblem? {
            if current >= 0 { close(current) }
            current = descriptor
            var info = stat()
            guard fstat(descriptor, &info) == 0 else {
                return FileTrustProblem("cannot check the directory \(shown) of the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false)
            }
            guard info.st_mode & S_IFMT == S_IFDIR else {
                return FileTrustProblem("\(shown) above the \(kind.noun) \(path) is not a directory", refused: false)
            }
            return untrustedDirectory(shown, owner: info.st_uid, mode: UInt16(truncatingIfNeeded: info.st_mode), path: path, kind: kind, owners: owners)
        }

        if let problem = enter(open("/", pathOnly | O_DIRECTORY | O_CLOEXEC)) { return .failure(problem) }
        var links = 0
        var created: [String] = []
        while let component = pending.popLast() {
            if component == "." { continue }
            var info = stat()
            if fstatat(current, String(component), &info, AT_SYMLINK_NOFOLLOW) != 0, errno == ENOENT, let creating, component != ".." {
                let made = makeDirectory(String(component), in: current, creating)
                walked.append(component)
                switch made {
                case .success(let descriptor):
                    created.append(shown)
                    if let problem = enter(descriptor) { return .failure(problem) }
                    continue
                case .failure(let failure):
                    return .failure(
                        FileTrustProblem("cannot create the directory \(shown) of the \(kind.noun) \(path): \(failure.reason)", refused: false)
                    )
                }
            }
            guard fstatat(current, String(component), &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                return .failure(
                    FileTrustProblem(
                        "cannot open the directory \(shown == "/" ? "" : shown)/\(component) of the \(kind.noun) \(path): \(String(cString: strerror(errno)))",
                        refused: false
                    )
                )
            }
            if info.st_mode & S_IFMT == S_IFLNK {
                let link = (shown == "/" ? "" : shown) + "/" + component
                guard owners.contains(info.st_uid) else {
                    return .failure(
                        FileTrustProblem(
                            "the symbolic link \(link) above the \(kind.noun) \(path) is owned by uid \(info.st_uid): others could redirect the file",
                            refused: true
                        )
                    )
                }
                links += 1
                guard links <= 40, let target = readLink(current, String(component)), !target.isEmpty else {
                    return .failure(FileTrustProblem("cannot follow the symbolic link \(link) above the \(kind.noun) \(path)", refused: false))
                }
                if target.hasPrefix("/") {
                    walked = []
                    if let problem = enter(open("/", pathOnly | O_DIRECTORY | O_CLOEXEC)) { return .failure(problem) }
                }
                pending += target.split(separator: "/", omittingEmptySubsequences: true).reversed()
                continue
            }
            // O_NOFOLLOW: a link swapped in since fstatat fails here, or is no directory below.
            let next = openat(current, String(component), pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if component == ".." { _ = walked.popLast() } else { walked.append(component) }
            guard next >= 0 else {
                return .failure(
                    FileTrustProblem("cannot open the directory \(shown) of the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false)
                )
            }
            if let problem = enter(next) { return .failure(problem) }
        }
        // A readable descriptor of the same directory, for fsync after a rename; a directory
        // the caller may only search keeps the path descriptor, and is not synced.
        let readable = openat(current, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var info = stat()
        let directory = TrustedDirectory(
            descriptor: readable >= 0 ? readable : current,
            path: shown,
            name: String(name),
            canSync: readable >= 0,
            created: created,
            othersMayAdd: fstat(current, &info) != 0 || info.st_mode & 0o022 != 0
        )
        if readable < 0 { current = -1 }  // handed over
        return .success(directory)
    }

    /// `O_PATH`: a descriptor to walk from and `fstat`, which needs only search permission on
    /// the directory. Linux's value (every architecture but alpha, parisc and sparc); glibc
    /// defines the name only under `_GNU_SOURCE`, which Swift's Glibc module does not set.
    private static var pathOnly: Int32 { 0o10_000_000 }

    /// A new directory `name` in `parent`, opened (never through a link) and given the mode and
    /// group of `creating` on its descriptor; the error's text when it cannot be.
    private static func makeDirectory(_ name: String, in parent: Int32, _ creating: DirectoryCreation) -> Result<Int32, DirectoryCreation.Failure> {
        func failure() -> Result<Int32, DirectoryCreation.Failure> { .failure(DirectoryCreation.Failure(String(cString: strerror(errno)))) }
        // 0700 until the fchmod: nobody else can enter it while it is not what it will be.
        guard mkdirat(parent, name, 0o700) == 0 else { return failure() }
        let descriptor = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return failure() }
        if let group = creating.group, fchown(descriptor, uid_t.max, group) != 0 {
            close(descriptor)
            return failure()
        }
        guard fchmod(descriptor, creating.mode) == 0 else {
            close(descriptor)
            return failure()
        }
        return .success(descriptor)
    }

    private static func readLink(_ directory: Int32, _ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(directory, name, &buffer, buffer.count - 1)
        guard count > 0, count < buffer.count - 1 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The ownership and mode rules, for a file's owner and mode.
    private static func problem(path: String, kind: Kind, owner: UInt32, mode: UInt16, owners: Set<UInt32>) -> String? {
        let octal = "0" + String(mode & 0o7777, radix: 8)
        if !owners.contains(owner) {
            return "the \(kind.noun) \(path) is owned by uid \(owner); it must belong to root or to the daemon's user (uid \(geteuid()))"
        }
        if mode & 0o022 != 0 {
            return "the \(kind.noun) \(path) is writable by \(mode & 0o002 != 0 ? "everyone" : "its group") (mode \(octal)); run chmod go-w on it"
        }
        if kind == .secret, mode & 0o004 != 0 {
            return "the \(kind.noun) \(path) is readable by everyone (mode \(octal)); run chmod o-r on it"
        }
        return nil
    }

    /// FoundationEssentials gives file attributes as `UInt`; with Foundation loaded they are
    /// `NSNumber`s, which only bridge through `as? Int`.
    private static func integer(_ value: Any?) -> Int? {
        if let value = value as? any BinaryInteger { return Int(truncatingIfNeeded: value) }
        return value as? Int
    }
}

/// Why a trusted file is not used: a sentence naming it, and whether it was refused by the
/// ownership rules (`refused: …` in a report) rather than missing or unreadable.
public struct FileTrustProblem: Error, Sendable, CustomStringConvertible {
    public var description: String
    public var refused: Bool

    public init(_ description: String, refused: Bool) {
        self.description = description
        self.refused = refused
    }

    /// The sentence of a link's target's walk, said of the file the administrator named.
    func naming(_ path: String, for target: String) -> FileTrustProblem {
        guard path != target else { return self }
        return FileTrustProblem("\(description) (the target of \(path))", refused: refused)
    }
}

/// A directory opened and checked by ``FileTrust/openDirectory(of:as:owners:)``, and the name
/// of the file in it. The owner closes ``descriptor``.
public struct TrustedDirectory: Sendable {
    /// The directory, to create, rename and remove the file relative to.
    public var descriptor: Int32
    /// Where the walk ended (symbolic links resolved), for messages.
    public var path: String
    /// The file's name in the directory.
    public var name: String
    /// Whether ``descriptor`` may be fsynced (it is not a search-only `O_PATH` descriptor).
    public var canSync: Bool
    /// The directories the walk made (``DirectoryCreation``), outermost first.
    public var created: [String] = []
    /// Others may add entries to the directory (root's sticky /tmp): a name left free there can
    /// be taken by another user's file, which the writer then cannot replace.
    public var othersMayAdd = false
}

/// How ``FileTrust/openDirectory(of:as:owners:creating:)`` makes the directories it misses.
public struct DirectoryCreation: Sendable {
    /// The new directories' mode (the umask does not apply).
    public var mode: UInt32
    /// Their group, or `nil` for the caller's.
    public var group: UInt32?

    public init(mode: UInt32, group: UInt32?) {
        self.mode = mode
        self.group = group
    }

    struct Failure: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
