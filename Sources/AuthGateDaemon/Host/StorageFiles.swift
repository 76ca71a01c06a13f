import FoundationEssentials
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Why the key or the session store cannot be used: one sentence that names the file and
/// what is wrong with it. It never carries key bytes or tokens.
struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file or directory concerned.
    var file: String
    /// A sentence for a person, naming `file`.
    var message: String

    init(file: String, _ message: String) {
        self.file = file
        self.message = message
    }

    var description: String { message }
}

/// The few file operations the daemon needs (its storage, consent.json, the handover's memfds,
/// the helper programs' paths), on swift-system's `FileDescriptor` (which retries
/// `EINTR` and partial writes) where it has them, reporting failures as `errno` sentences.
enum StorageFiles {
    /// Permission bits that let anyone but the owner in.
    static let groupAndOther: UInt32 = 0o077

    /// What the storage checks need to know about a file.
    ///
    /// Read through swift-system's `Stat`: Glibc's `struct stat` is claimed by whichever C
    /// module a build happens to import first (Glibc, CoreFoundation, CDispatch …), so using
    /// its members directly breaks MemberImportVisibility from one clean build to the next.
    struct FileInfo {
        var isRegularFile: Bool
        var isDirectory: Bool
        /// The permission bits (`0o7777`).
        var permissions: UInt32
        var owner: UInt32
        var size: Int64

        init(_ status: Stat) {
            isRegularFile = status.type == .regular
            isDirectory = status.type == .directory
            permissions = UInt32(status.permissions.rawValue)
            owner = status.userID.rawValue
            size = status.size
        }
    }

    /// Refuses a file or directory that anyone but the daemon's user could use: one with any
    /// group or other permission bit, or owned by another uid.
    /// - Parameters:
    ///   - what: How a sentence names it, `the key file /path`.
    ///   - risk: What others could do, for the sentence.
    ///   - mode: The mode it must have, `0600`.
    static func requirePrivate(_ info: FileInfo, _ what: String, file: String, risk: String, mode: String) throws(StorageError) {
        guard info.permissions & groupAndOther == 0 else {
            let actual = String(info.permissions & 0o777, radix: 8)
            throw StorageError(file: file, "\(what) has mode \(actual), so other users may \(risk); it must be \(mode) (chmod \(mode.dropFirst()) \(file))")
        }
        guard info.owner == geteuid() else {
            throw StorageError(file: file, "\(what) belongs to uid \(info.owner), not to the daemon's uid \(geteuid())")
        }
    }

    /// The current `errno` as text.
    static func errorText(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }

    /// Opens `path` for reading (close-on-exec), not following a symlink when `noFollow`.
    /// Returns -1 with `errno` set on failure.
    static func openFile(_ path: String, noFollow: Bool = false, directory: Bool = false) -> Int32 {
        var options: FileDescriptor.OpenOptions = [.closeOnExec]
        if noFollow { options.insert(.noFollow) }
        if directory { options.insert(.directory) }
        do {
            return try FileDescriptor.open(FilePath(path), .readOnly, options: options, retryOnInterrupt: true).rawValue
        } catch {
            errno = code(error)
            return -1
        }
    }

    /// `fstat(2)` of an open descriptor; `nil` with `errno` set when it fails.
    static func fileStatus(_ fd: Int32) -> FileInfo? {
        do {
            return FileInfo(try FileDescriptor(rawValue: fd).stat())
        } catch {
            errno = error.rawValue
            return nil
        }
    }

    /// `stat(2)` of a path (following symlinks); `nil` with `errno` set when it fails.
    static func pathStatus(_ path: String) -> FileInfo? {
        do {
            return FileInfo(try FilePath(path).stat())
        } catch {
            errno = error.rawValue
            return nil
        }
    }

    /// Reads to the end of the file, but at most `limit + 1` bytes, so a caller can tell a
    /// file over the limit without reading all of it.
    /// - Returns: `nil` with `errno` set when a read fails.
    static func readAll(_ fd: Int32, limit: Int) -> [UInt8]? {
        let file = FileDescriptor(rawValue: fd)
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        do {
            while bytes.count <= limit {
                let wanted = min(chunk.count, limit + 1 - bytes.count)
                let count = try chunk.withUnsafeMutableBytes { try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted])) }
                if count == 0 { break }
                bytes += chunk[0..<count]
            }
        } catch {
            errno = code(error)
            return nil
        }
        return bytes
    }

    /// The storage's one way to write a file: `bytes` in a new file named `prefix` and six
    /// random characters (mkstemp, in the directory where they will live, so that a rename or
    /// link cannot cross file systems), exactly 0600, synced and closed. The caller then
    /// publishes it under its real name (rename or link) and syncs the directory
    /// (``syncDirectory(_:)``): a crash never leaves an empty or short file under that name.
    /// - Returns: The temporary file's path, or what went wrong as text (nothing is left behind).
    static func writeTemporaryFile(_ bytes: [UInt8], prefix: String) -> Result<String, TextError> {
        guard let (fd, temporary) = createTemporaryFile(prefix: prefix) else { return .failure(TextError(errorText())) }
        let file = FileDescriptor(rawValue: fd)
        var problem: String?
        do {
            // mkstemp uses 0600 less the umask; this makes it exactly 0600.
            guard fchmod(fd, 0o600) == 0 else { throw Errno(rawValue: errno) }
            _ = try file.writeAll(bytes)
            guard sync(fd) else { throw Errno(rawValue: errno) }
        } catch {
            problem = errorText(code(error))
        }
        // close can report a delayed write error (NFS, quotas).
        do {
            try file.close()
        } catch {
            problem = problem ?? errorText(code(error))
        }
        if let problem {
            unlink(temporary)
            return .failure(TextError(problem))
        }
        return .success(temporary)
    }

    /// The `errno` value of a swift-system error.
    private static func code(_ error: any Error) -> Int32 {
        (error as? Errno)?.rawValue ?? EIO
    }

    /// A failure as `errno`'s text.
    struct TextError: Error {
        var text: String
        init(_ text: String) { self.text = text }
    }

    /// `fsync(2)`, retried on `EINTR`.
    static func sync(_ fd: Int32) -> Bool {
        while fsync(fd) != 0 {
            if errno != EINTR { return false }
        }
        return true
    }

    /// `mkstemp(3)`: creates a new file (O_EXCL, mode 0600 less the umask) whose name is
    /// `prefix` followed by six random characters.
    /// - Returns: The open descriptor and the file's path; `nil` with `errno` set on failure.
    static func createTemporaryFile(prefix: String) -> (fd: Int32, path: String)? {
        var template = Array((prefix + "XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return nil }
        // mkstemp only replaced the Xs; drop the NUL terminator.
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (fd, path)
    }

    /// Flushes a directory's entries to disk.
    ///
    /// `fsync` of a file makes its contents durable but not its name: after a crash, a file
    /// just created, renamed or removed may be back the way it was unless the directory that
    /// holds the name is synced too.
    /// - Returns: `nil`, or what went wrong as text.
    static func syncDirectory(_ path: String) -> String? {
        let fd = openFile(path, directory: true)
        guard fd >= 0 else { return errorText() }
        defer { close(fd) }
        return sync(fd) ? nil : errorText()
    }

    /// Creates `path` and its missing parents with mode 0700; an existing directory is left
    /// as it is, but must be the daemon's user's and writable by nobody else: another user
    /// who may add and remove names in it could take the key file away (and have a new key
    /// lose every session), swap `sessions/`, or put a FIFO or answers of their own in
    /// `consent.json`.
    /// - Returns: `nil`, or what went wrong as text.
    static func createPrivateDirectory(_ path: String) -> String? {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            // Existing parents are left alone (and may well be unwritable); EEXIST covers a
            // directory that another thread or process creates in the meantime.
            if pathStatus(prefix) == nil, mkdir(prefix, 0o700) != 0, errno != EEXIST { return errorText() }
        }
        guard let info = pathStatus(path) else { return errorText() }
        guard info.isDirectory else { return "it is not a directory" }
        guard info.owner == geteuid() else {
            return "it belongs to uid \(info.owner), not to the daemon's user (uid \(geteuid())): make it the daemon's user's, mode 0700"
        }
        guard info.permissions & 0o022 == 0 else {
            return "other users may add and remove files in it (mode \(String(info.permissions, radix: 8))): make it mode 0700"
        }
        return nil
    }
}
