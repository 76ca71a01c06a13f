import AuthGateCore
import Crypto
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The 256-bit AES key that encrypts the session store.
///
/// It comes from the systemd credential `authgate.key` when the service has one
/// (`LoadCredential=`/`SetCredentialEncrypted=`), else, for a per-user daemon, from the
/// user's Secret Service (``StorageKeyKeeper``), else from `<state directory>/authgate.key`,
/// which the first start creates. Whoever holds it can read every stored token, so the file
/// must be private to the daemon's user. The key never prints itself.
struct StorageKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The key's file name, in the credentials directory and in the state directory.
    static let fileName = "authgate.key"
    static let byteCount = 32

    let symmetricKey: SymmetricKey

    /// A key from exactly 32 raw bytes; `nil` for any other length.
    init?(rawBytes: [UInt8]) {
        guard rawBytes.count == Self.byteCount else { return nil }
        symmetricKey = SymmetricKey(data: rawBytes)
    }

    private init(_ key: SymmetricKey) {
        symmetricKey = key
    }

    /// A new random key, from the system's secure random generator.
    static func generate() -> StorageKey {
        StorageKey(SymmetricKey(size: .bits256))
    }

    var description: String { "<storage key>" }
    var debugDescription: String { "<storage key>" }

    /// Finds the key: the credential if `credentialsDirectory` holds `authgate.key`, else the
    /// state directory's, created on first use.
    ///
    /// - Parameters:
    ///   - stateDirectory: The daemon's state directory; created 0700 if missing.
    ///   - credentialsDirectory: `$CREDENTIALS_DIRECTORY`, or `nil`. Only read, never written.
    /// - Throws: When the key file exists but cannot be used (wrong size or encoding, too
    ///   open permissions, not a regular file), or cannot be created.
    static func load(stateDirectory: String, credentialsDirectory: String?) throws(StorageError) -> StorageKey {
        if let credentialsDirectory, !credentialsDirectory.isEmpty {
            let path = credentialsDirectory + "/" + fileName
            if let key = try readCredential(path) { return key }
        }
        if let problem = StorageFiles.createPrivateDirectory(stateDirectory) {
            throw StorageError(file: stateDirectory, "cannot create the state directory \(stateDirectory): \(problem)")
        }
        let path = stateDirectory + "/" + fileName
        if let key = try readStateKey(path) { return key }
        return try create(path, in: stateDirectory)
    }

    /// Reads the credential: 32 raw bytes, or the same as base64 (44 characters) or hex (64),
    /// surrounding whitespace ignored.
    /// - Returns: `nil` when there is no such file, so the state directory's key is used.
    static func readCredential(_ path: String) throws(StorageError) -> StorageKey? {
        // systemd makes credentials read-only files owned by the service's user, so their
        // permissions are systemd's business; only the contents are checked here.
        let fd = StorageFiles.openFile(path)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw StorageError(file: path, "cannot read the key credential \(path): \(StorageFiles.errorText())")
        }
        defer { close(fd) }
        guard let info = StorageFiles.fileStatus(fd), info.isRegularFile else {
            throw StorageError(file: path, "the key credential \(path) is not a regular file")
        }
        guard let bytes = StorageFiles.readAll(fd, limit: 4096) else {
            throw StorageError(file: path, "cannot read the key credential \(path): \(StorageFiles.errorText())")
        }
        if let key = StorageKey(rawBytes: bytes) ?? decodeText(bytes) { return key }
        throw StorageError(file: path, "the key credential \(path) holds neither 32 raw bytes nor 32 bytes in base64 or hex")
    }

    /// Decodes a key written as base64 (44 characters) or hex (64), ignoring surrounding whitespace.
    private static func decodeText(_ bytes: [UInt8]) -> StorageKey? {
        guard bytes.count <= 4096, let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let trimmed = text.trimming(while: \.isWhitespace)
        if trimmed.count == 44, let data = Data(base64Encoded: trimmed) {
            return StorageKey(rawBytes: Array(data))
        }
        if trimmed.count == 64 {
            var raw = [UInt8]()
            var digits = trimmed.utf8.makeIterator()
            while let high = digits.next(), let low = digits.next() {
                guard let h = high.hexDigitValue, let l = low.hexDigitValue else { return nil }
                raw.append(h << 4 | l)
            }
            return StorageKey(rawBytes: raw)
        }
        return nil
    }

    /// Reads the state directory's key file, refusing one that others could read or replace.
    /// - Returns: `nil` when there is none yet.
    static func readStateKey(_ path: String) throws(StorageError) -> StorageKey? {
        // O_NOFOLLOW: a symlink planted here could point the daemon at a key someone else knows.
        let fd = StorageFiles.openFile(path, noFollow: true)
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw StorageError(file: path, "the key file \(path) is a symbolic link; it must be a regular file") }
            throw StorageError(file: path, "cannot read the key file \(path): \(StorageFiles.errorText())")
        }
        defer { close(fd) }
        guard let info = StorageFiles.fileStatus(fd) else {
            throw StorageError(file: path, "cannot read the key file \(path): \(StorageFiles.errorText())")
        }
        guard info.isRegularFile else {
            throw StorageError(file: path, "the key file \(path) is not a regular file")
        }
        try StorageFiles.requirePrivate(info, "the key file \(path)", file: path, risk: "read or change it", mode: "0600")
        guard info.size == Self.byteCount else {
            throw StorageError(file: path, "the key file \(path) is \(info.size) bytes long; it must be exactly \(byteCount) random bytes")
        }
        guard let bytes = StorageFiles.readAll(fd, limit: byteCount), let key = StorageKey(rawBytes: bytes) else {
            throw StorageError(file: path, "cannot read the key file \(path): \(StorageFiles.errorText())")
        }
        return key
    }

    /// Creates the key file with a new random key.
    ///
    /// The key is written to a private temporary file, synced, then linked to its name:
    /// `link` fails if the name exists (like `O_CREAT|O_EXCL`), and a crash can never leave
    /// an empty or short key file behind under the real name.
    static func create(_ path: String, in directory: String) throws(StorageError) -> StorageKey {
        removeStrayTemporaryFiles(in: directory)
        let key = generate()
        let bytes = key.symmetricKey.withUnsafeBytes { Array($0) }
        let temporary: String
        switch StorageFiles.writeTemporaryFile(bytes, prefix: directory + "/" + temporaryPrefix) {
        case .success(let written): temporary = written
        case .failure(let problem): throw StorageError(file: path, "cannot write the key file \(path): \(problem.text)")
        }
        let linked = link(temporary, path) == 0
        let linkError = errno
        unlink(temporary)
        if !linked {
            // Another process created the key first: use that one, so both agree.
            if linkError == EEXIST, let existing = try readStateKey(path) { return existing }
            throw StorageError(file: path, "cannot create the key file \(path): \(StorageFiles.errorText(linkError))")
        }
        if let problem = StorageFiles.syncDirectory(directory) {
            throw StorageError(file: path, "cannot sync the directory of the new key file \(path): \(problem)")
        }
        return key
    }

    private static let temporaryPrefix = ".\(fileName).tmp-"

    /// Removes key files that a crash left half-made: they were never linked to the real name,
    /// so no data was ever encrypted with them.
    private static func removeStrayTemporaryFiles(in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(temporaryPrefix) {
            unlink(directory + "/" + name)
        }
    }

    /// The state directory's file for the key that a `rekey` has made but not yet put in place.
    static let nextFileName = "authgate.key.next"

    /// Writes `key` to `path`, replacing what is there, atomically (temporary file, fsync,
    /// rename, fsync of the directory).
    static func write(_ key: StorageKey, to path: String, in directory: String) throws(StorageError) {
        let bytes = key.symmetricKey.withUnsafeBytes { Array($0) }
        let temporary: String
        switch StorageFiles.writeTemporaryFile(bytes, prefix: directory + "/" + temporaryPrefix) {
        case .success(let written): temporary = written
        case .failure(let problem): throw StorageError(file: path, "cannot write the key file \(path): \(problem.text)")
        }
        try rename(temporary, to: path, in: directory)
    }

    /// Renames `source` over `path` and syncs the directory: the switch from one key file to
    /// another is one atomic step.
    static func rename(_ source: String, to path: String, in directory: String) throws(StorageError) {
        guard Glibc.rename(source, path) == 0 else {
            let problem = StorageFiles.errorText()
            unlink(source)
            throw StorageError(file: path, "cannot put the key file \(path) in place: \(problem)")
        }
        if let problem = StorageFiles.syncDirectory(directory) {
            throw StorageError(file: path, "cannot sync the directory of the key file \(path): \(problem)")
        }
    }

    /// Removes a key file (none is no failure) and syncs its directory, so it cannot come back
    /// after a crash.
    static func remove(_ path: String, in directory: String) throws(StorageError) {
        if unlink(path) != 0 {
            if errno == ENOENT { return }
            throw StorageError(file: path, "cannot remove the key file \(path): \(StorageFiles.errorText())")
        }
        if let problem = StorageFiles.syncDirectory(directory) {
            throw StorageError(file: path, "removed the key file \(path), but syncing its directory failed: \(problem)")
        }
    }
}
