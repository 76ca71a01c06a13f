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

        var noun: String {
            switch self {
            case .providerFile: "provider file"
            case .providersDirectory: "providers directory"
            case .secret: "secret file"
            case .certificate: "CA file"
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
              let owner = integer(attributes[.ownerAccountID]).map({ UInt32(truncatingIfNeeded: $0) }) else { return nil }
        return problem(path: path, kind: kind, owner: owner, mode: mode, owners: owners)
    }

    /// Reads a file the daemon trusts, checked on the descriptor it reads: its path resolved
    /// once, every directory above it checked as sshd's StrictModes does (owned by root or the
    /// daemon's user and writable by nobody else, or root's sticky directories such as /tmp,
    /// where others cannot replace an entry), the file opened with `O_NOFOLLOW`, and its owner,
    /// mode, type and size taken from `fstat` of that descriptor. Nothing is reopened by path
    /// afterwards, so a file swapped after the check is never the one used.
    /// - Returns: The bytes, or a sentence saying why the file is not used.
    public static func read(_ path: String, as kind: Kind, maximumSize: Int, owners: Set<UInt32> = trustedOwners) -> Result<[UInt8], FileTrustProblem> {
        guard let resolved = realpath(path, nil) else {
            return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
        }
        let real = String(cString: resolved)
        free(resolved)
        if let problem = directoryProblem(above: real, path: path, kind: kind, owners: owners) { return .failure(problem) }
        let descriptor = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            return .failure(FileTrustProblem("cannot read the \(kind.noun) \(path): \(String(cString: strerror(errno)))", refused: false))
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(FileTrustProblem("the \(kind.noun) \(path) is not a regular file", refused: false)) }
        if let problem = problem(path: path, kind: kind, owner: info.st_uid, mode: UInt16(truncatingIfNeeded: info.st_mode), owners: owners) {
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
            let mode = UInt16(truncatingIfNeeded: info.st_mode)
            let sticky = mode & UInt16(S_ISVTX) != 0
            // Root's sticky directories (/tmp): others may add entries, but not replace ours.
            let trusted = owners.contains(info.st_uid) && (mode & 0o022 == 0 || (sticky && info.st_uid == 0))
            if !trusted {
                let why = owners.contains(info.st_uid) ? "is writable by \(mode & 0o002 != 0 ? "everyone" : "its group") (mode 0\(String(mode & 0o7777, radix: 8)))"
                                                         : "is owned by uid \(info.st_uid)"
                return FileTrustProblem("the directory \(directory) above the \(kind.noun) \(path) \(why): others could replace the file", refused: true)
            }
            if directory == "/" { break }
        }
        return nil
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
}
