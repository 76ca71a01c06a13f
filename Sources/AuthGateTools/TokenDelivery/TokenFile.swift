package import AuthGateCore
import FoundationEssentials

#if canImport(Glibc)
package import Glibc
#endif

/// `--owner` and `--group` of a file the sink or `exec --token-file` writes: names or numbers,
/// resolved at start; only root may give a file away.
package struct FileOwnership {
    package var uid: uid_t?
    package var gid: gid_t?

    package init(owner: String?, group: String?) throws {
        if owner != nil || group != nil, geteuid() != 0 {
            throw ToolFailure(
                "--owner and --group need root (this runs as uid \(geteuid())); run the sink as the service's user instead.",
                status: ToolFailure.usage
            )
        }
        if let owner {
            if let entry = getpwnam(owner) {
                uid = entry.pointee.pw_uid
            } else if let number = UInt32(owner), number != UInt32.max {
                uid = number
            } else {
                throw ToolFailure("--owner \(Terminal.safe(owner)): no such user.", status: ToolFailure.usage)
            }
        }
        if let group {
            if let entry = getgrnam(group) {
                gid = entry.pointee.gr_gid
            } else if let number = UInt32(group), number != UInt32.max {
                gid = number
            } else {
                throw ToolFailure("--group \(Terminal.safe(group)): no such group.", status: ToolFailure.usage)
            }
        }
    }
}

/// The sink's file in the directory it opened at start: replaced in one step (a temp file in
/// the directory, written, fsynced, renamed over the file, and the directory fsynced, so that a
/// reader sees the old file or the new one, whole, and a crash leaves one of the two) and
/// removed, every call relative to the directory's descriptor, never by path.
///
/// In a directory others may add to (root's sticky /tmp) the name is never left free, since
/// another user could then put a file of theirs there for the service to read, which a sink
/// not running as root could not even replace: the sink holds it from its start (an empty
/// file until there is a token, ``claim(mode:)``), empties the file where it would remove it,
/// and refuses to go on when it finds the name taken by another user's file.
package final class TokenFile {
    package struct Failure: Error, CustomStringConvertible {
        package enum Kind: Sendable {
            /// This write failed; the next may not.
            case failed
            /// The name is another user's (or no regular file) in a directory others may add
            /// to: the sink cannot go on without serving that file.
            case taken
            /// The directory opened at start is gone (removed, perhaps made again by another
            /// path): nothing can be written through it any more.
            case gone
        }

        package var description: String
        package var kind = Kind.failed
    }

    private let directory: TrustedDirectory
    /// The path as the user gave it, for messages.
    private let shown: String
    private let ownership: FileOwnership?

    package init(_ directory: TrustedDirectory, shown: String, ownership: FileOwnership? = nil) {
        self.directory = directory
        self.shown = shown
        self.ownership = ownership
    }

    deinit {
        close(directory.descriptor)
    }

    package func write(_ bytes: [UInt8], mode: mode_t) throws {
        try checkName()
        var info = stat()
        if fstat(directory.descriptor, &info) == 0, info.st_nlink == 0 {
            throw Failure(
                description: "its directory \(directory.path) was removed since the start; start again to write the file where that path leads now",
                kind: .gone
            )
        }
        let (descriptor, temporary) = try createTemporary()
        var renamed = false
        defer {
            if !renamed { unlinkat(directory.descriptor, temporary, 0) }
        }
        guard fchmod(descriptor, mode) == 0 else {
            close(descriptor)
            throw Failure(description: String(cString: strerror(errno)))
        }
        // Given away before the token is in it (uid_t.max leaves one of the two as it is).
        if let ownership, ownership.uid != nil || ownership.gid != nil,
            fchown(descriptor, ownership.uid ?? uid_t.max, ownership.gid ?? gid_t.max) != 0
        {
            close(descriptor)
            throw Failure(description: "cannot set the owner: \(String(cString: strerror(errno)))")
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                let reason = written == 0 ? "nothing could be written" : String(cString: strerror(errno))
                close(descriptor)
                throw Failure(description: reason)
            }
            offset += written
        }
        // Closed whether or not fsync worked: a failing disk must not cost a descriptor a write.
        let synced = fsync(descriptor) == 0 ? nil : errno
        let closed = close(descriptor) == 0 ? nil : errno
        if let failed = synced ?? closed { throw Failure(description: String(cString: strerror(failed))) }
        guard renameat(directory.descriptor, temporary, directory.descriptor, directory.name) == 0 else {
            throw Failure(description: String(cString: strerror(errno)))
        }
        renamed = true
        if directory.canSync { fsync(directory.descriptor) }
    }

    /// Removes the file, and says so and why; in a directory others may add to, empties it
    /// instead (the name stays the sink's).
    package func remove(because reason: String, mode: mode_t) {
        if directory.othersMayAdd {
            if (try? write([], mode: mode)) != nil {
                Terminal.writeError("authgate sink: emptied \(Terminal.safe(shown)) (kept, so that no other user can put a file in its place): \(reason).\n")
            }
        } else if unlinkat(directory.descriptor, directory.name, 0) == 0 {
            Terminal.writeError("authgate sink: removed \(Terminal.safe(shown)): \(reason).\n")
        }
    }

    /// At the start, in a directory others may add to: takes the name with an empty file when
    /// it is free (a file of the sink's own is left as it is).
    /// - Throws: ``Failure`` (``Failure/Kind/taken``) when another user's file holds it.
    package func claim(mode: mode_t) throws {
        guard directory.othersMayAdd, try !checkName() else { return }
        try write([], mode: mode)
    }

    /// In a directory others may add to: the name must be free, or a regular file of the sink's
    /// own user (or of `--owner`). Returns whether such a file holds it.
    @discardableResult
    private func checkName() throws -> Bool {
        guard directory.othersMayAdd else { return false }
        var info = stat()
        guard fstatat(directory.descriptor, directory.name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        let ours = info.st_uid == geteuid() || info.st_uid == ownership?.uid
        guard info.st_mode & S_IFMT == S_IFREG, ours else {
            throw Failure(
                description:
                    "\(shown) is \(info.st_mode & S_IFMT == S_IFREG ? "a file of uid \(info.st_uid)" : "no regular file") in \(directory.path), where any user may add files: another user may have put it there for the service to read. Remove it, or keep the file in a directory only its users can write",
                kind: .taken
            )
        }
        return true
    }

    /// A new file `.NAME.XXXXXX` in the directory, created exclusively (`mkstemp` takes no
    /// directory descriptor), mode 0600 until the `fchmod`.
    private func createTemporary() throws -> (Int32, String) {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100 {
            let name = ".\(directory.name)." + String((0..<6).map { _ in letters.randomElement(using: &generator)! })
            let descriptor = openat(directory.descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 { return (descriptor, name) }
            guard errno == EEXIST else { break }
        }
        throw Failure(description: String(cString: strerror(errno)))
    }
}
