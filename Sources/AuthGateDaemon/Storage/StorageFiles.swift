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

/// The few POSIX file operations the storage needs, each retrying `EINTR` and reporting
/// failures as `errno` sentences.
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

    /// The current `errno` as text.
    static func errorText(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }

    /// `open(2)`, retried on `EINTR`. Returns -1 with `errno` set on failure.
    static func openFile(_ path: String, _ flags: Int32, mode: mode_t = 0) -> Int32 {
        while true {
            let fd = open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 || errno != EINTR { return fd }
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

    /// Writes all of `bytes`, looping over partial writes and `EINTR`.
    /// - Returns: `false` with `errno` set when a write fails.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }

    /// Reads to the end of the file, but at most `limit + 1` bytes, so a caller can tell a
    /// file over the limit without reading all of it.
    /// - Returns: `nil` with `errno` set when a read fails.
    static func readAll(_ fd: Int32, limit: Int) -> [UInt8]? {
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, min($0.count, limit + 1 - bytes.count)) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
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
        let fd = openFile(path, O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { return errorText() }
        defer { close(fd) }
        return sync(fd) ? nil : errorText()
    }

    /// Creates `path` and its missing parents with mode 0700; an existing directory is left
    /// as it is.
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
        return info.isDirectory ? nil : "it is not a directory"
    }
}
