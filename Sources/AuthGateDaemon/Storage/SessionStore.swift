import AuthGateCore
import Crypto
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One persistent session as stored on disk: the session's identity, the provider
/// configuration it was obtained under, and its tokens.
///
/// The tokens are plain strings here because this type exists to be encoded; it prints them
/// as `<redacted>` all the same.
struct PersistedSession: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    var provider: String
    var session: String
    var grant: Grant
    var subject: String?
    /// The provider configuration's issuer when the session was saved, so the daemon can drop
    /// sessions whose provider has since changed.
    var issuer: String?
    /// The provider configuration's client ID when the session was saved (see `issuer`).
    var clientID: String?
    var accessToken: String
    var tokenType: String
    var expiresAt: Date
    var refreshToken: String?
    var refreshTokenExpiresAt: Date?
    var idToken: String?
    var scopes: [String]
    var savedAt: Date

    init(provider: String, session: String, grant: Grant, subject: String?, issuer: String?, clientID: String?,
         tokens: TokenSet, savedAt: Date) {
        self.provider = provider
        self.session = session
        self.grant = grant
        self.subject = subject
        self.issuer = issuer
        self.clientID = clientID
        self.accessToken = tokens.accessToken.exposedValue
        self.tokenType = tokens.tokenType
        self.expiresAt = tokens.expiresAt
        self.refreshToken = tokens.refreshToken?.exposedValue
        self.refreshTokenExpiresAt = tokens.refreshTokenExpiresAt
        self.idToken = tokens.idToken?.exposedValue
        self.scopes = tokens.scopes
        self.savedAt = savedAt
    }

    /// The tokens, as the rest of the daemon holds them.
    var tokens: TokenSet {
        TokenSet(accessToken: Secret(accessToken), tokenType: tokenType, expiresAt: expiresAt,
                 refreshToken: refreshToken.map(Secret.init), refreshTokenExpiresAt: refreshTokenExpiresAt,
                 idToken: idToken.map(Secret.init), scopes: scopes)
    }

    var description: String {
        "PersistedSession(provider: \(provider), session: \(session), grant: \(grant.rawValue), expiresAt: \(expiresAt), tokens: <redacted>)"
    }

    var debugDescription: String { description }

    enum CodingKeys: String, CodingKey {
        case provider
        case session
        case grant
        case subject
        case issuer
        case clientID = "client_id"
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case refreshToken = "refresh_token"
        case refreshTokenExpiresAt = "refresh_token_expires_at"
        case idToken = "id_token"
        case scopes
        case savedAt = "saved_at"
    }
}

/// A sessions file that could not be used, as `loadAll` reports it.
struct StoreProblem: Sendable, Equatable, CustomStringConvertible {
    /// Whose file it was; `nil` for a problem with the sessions directory itself.
    var uid: UInt32?
    /// The file (or directory) concerned.
    var file: String
    /// What is wrong, as a sentence; never contains a token.
    var reason: String
    /// Where the file was moved so that the next save starts clean, if it was.
    var movedTo: String?

    var description: String {
        "\(file): \(reason)" + (movedTo.map { " (moved to \($0))" } ?? "")
    }
}

/// The persistent sessions of every uid, one encrypted file per uid.
///
/// Layout: `<state directory>/sessions/` (0700) holds `<uid>.sessions` (0600). Each file is
/// the 4 bytes `AGS1`, then an AES-256-GCM sealed box in its combined form (12-byte nonce,
/// ciphertext, 16-byte tag) of the JSON `{"version":1,"uid":N,"sessions":[...]}`. The
/// authenticated data is `authgate sessions v1 uid=N`, so a file copied onto another uid's
/// name fails to open rather than handing one user's tokens to another.
///
/// Saves replace the whole file atomically (temporary file, fsync, rename, fsync of the
/// directory), so after a crash a file holds either the old or the new list, never a mix.
///
/// A class with one lock rather than an actor: the API is synchronous, so the session
/// manager can persist a change before it answers and start-up can load before anything
/// runs; and the lock covers every file operation, not just saves of one uid, because
/// `loadAll` removes temporary files and moves bad files aside, which must not happen in
/// the middle of a save. The work under the lock is short: one small file and two fsyncs.
final class SessionStore: Sendable {
    /// `sessions/` under the state directory.
    let directory: String
    private let key: StorageKey
    private let lock = Mutex(())

    static let magic: [UInt8] = Array("AGS1".utf8)
    static let formatVersion = 1
    /// Files larger than this are refused when loading, and never written.
    static let maximumFileSize = 16 * 1024 * 1024
    static let fileSuffix = ".sessions"
    static let unreadableSuffix = ".sessions.unreadable"
    static let temporaryMarker = ".sessions.tmp-"

    init(stateDirectory: String, key: StorageKey) {
        directory = stateDirectory + "/sessions"
        self.key = key
    }

    /// The file that holds `uid`'s sessions.
    func path(uid: UInt32) -> String {
        "\(directory)/\(uid)\(Self.fileSuffix)"
    }

    /// Replaces `uid`'s stored sessions with `sessions`; an empty list removes the file.
    /// - Throws: When the directory is unsafe or the file cannot be written; the previous
    ///   file is then left as it was.
    func save(_ sessions: [PersistedSession], uid: UInt32) throws(StorageError) {
        try lock.withLock { _ throws(StorageError) in
            let exists = try checkDirectory(create: !sessions.isEmpty)
            if sessions.isEmpty {
                guard exists else { return }
                try remove(uid: uid)
            } else {
                try write(try seal(sessions, uid: uid), uid: uid)
            }
        }
    }

    /// Removes `uid`'s stored sessions, if any.
    func delete(uid: UInt32) throws(StorageError) {
        try save([], uid: uid)
    }

    /// Reads every uid's sessions.
    ///
    /// Never throws: a file that cannot be used is reported and moved aside to
    /// `<uid>.sessions.unreadable` (replacing an older one), so the other uids load and the
    /// next save for that uid starts clean. Temporary files left by a crash are removed.
    func loadAll() -> (sessions: [UInt32: [PersistedSession]], problems: [StoreProblem]) {
        lock.withLock { _ in
            do throws(StorageError) {
                guard try checkDirectory(create: false) else { return ([:], []) }
            } catch {
                return ([:], [StoreProblem(uid: nil, file: error.file, reason: error.message)])
            }
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: directory)
            } catch {
                return ([:], [StoreProblem(uid: nil, file: directory, reason: "cannot list the sessions directory \(directory)")])
            }
            var sessions: [UInt32: [PersistedSession]] = [:]
            var problems: [StoreProblem] = []
            var removedAny = false
            for name in names.sorted() {
                if name.hasPrefix("."), name.contains(Self.temporaryMarker) {
                    // Only a save in progress writes these, and none is (we hold the lock):
                    // this one was left by a crash before its rename.
                    removedAny = unlink(directory + "/" + name) == 0 || removedAny
                    continue
                }
                guard let uid = Self.uid(fileName: name) else { continue }
                switch readSessions(uid: uid) {
                case .success(let list):
                    sessions[uid] = list
                case .failure(let failure):
                    let file = path(uid: uid)
                    var problem = StoreProblem(uid: uid, file: file, reason: failure.reason)
                    let aside = directory + "/\(uid)" + Self.unreadableSuffix
                    if rename(file, aside) == 0 {
                        problem.movedTo = aside
                        removedAny = true
                    } else {
                        problem.reason += "; moving it to \(aside) failed: \(StorageFiles.errorText())"
                    }
                    problems.append(problem)
                }
            }
            if removedAny, let failure = StorageFiles.syncDirectory(directory) {
                // Not fatal: at worst a removed or moved file reappears after a crash.
                problems.append(StoreProblem(uid: nil, file: directory, reason: "cannot sync the sessions directory \(directory): \(failure)"))
            }
            return (sessions, problems)
        }
    }

    /// The uid of a file named `<uid>.sessions` with the uid in canonical decimal; `nil` for
    /// any other name.
    static func uid(fileName: String) -> UInt32? {
        guard fileName.hasSuffix(fileSuffix) else { return nil }
        let digits = fileName.dropLast(fileSuffix.count)
        guard digits.allSatisfy(\.isASCII), let uid = UInt32(digits), String(uid) == digits else { return nil }
        return uid
    }

    // MARK: - Format

    /// The JSON inside the encryption.
    private struct Envelope: Codable {
        var version: Int
        var uid: UInt32
        var sessions: [PersistedSession]
    }

    /// Read first, so a future version is reported as such rather than as a decoding failure.
    private struct VersionProbe: Decodable {
        var version: Int
    }

    /// Binds a file to its uid: opening it under another uid's name fails authentication.
    private static func authenticatedData(uid: UInt32) -> Data {
        Data("authgate sessions v1 uid=\(uid)".utf8)
    }

    private func seal(_ sessions: [PersistedSession], uid: UInt32) throws(StorageError) -> [UInt8] {
        let file = path(uid: uid)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        let bytes: [UInt8]
        do {
            let plaintext = try encoder.encode(Envelope(version: Self.formatVersion, uid: uid, sessions: sessions))
            bytes = try Self.fileContents(sealing: plaintext, uid: uid, key: key)
        } catch {
            throw StorageError(file: file, "cannot encrypt the sessions of uid \(uid) for \(file)")
        }
        guard bytes.count <= Self.maximumFileSize else {
            throw StorageError(file: file, "the sessions of uid \(uid) would make \(file) larger than 16 MiB; not saved")
        }
        return bytes
    }

    /// A file's bytes: the magic, then `plaintext` sealed for `uid`. Separate from `seal` so
    /// tests can make validly encrypted files with invalid contents.
    static func fileContents(sealing plaintext: Data, uid: UInt32, key: StorageKey) throws -> [UInt8] {
        let box = try AES.GCM.seal(plaintext, using: key.symmetricKey, authenticating: authenticatedData(uid: uid))
        // `combined` is only nil for nonces of a non-standard size; seal uses 12 bytes.
        guard let combined = box.combined else { throw CryptoKitError.incorrectParameterSize }
        return magic + Array(combined)
    }

    /// Reads and decrypts one uid's file.
    /// - Returns: The sessions, or why the file cannot be used (a sentence naming it).
    private func readSessions(uid: UInt32) -> Result<[PersistedSession], StoreFailure> {
        let file = path(uid: uid)
        // O_NOFOLLOW: a symlink here is not something this daemon made.
        let fd = StorageFiles.openFile(file, O_RDONLY | O_NOFOLLOW)
        guard fd >= 0 else { return .failure(StoreFailure("\(file) cannot be opened: \(StorageFiles.errorText())")) }
        defer { close(fd) }
        guard let info = StorageFiles.fileStatus(fd), info.isRegularFile else {
            return .failure(StoreFailure("\(file) is not a regular file"))
        }
        guard info.size <= Self.maximumFileSize else {
            return .failure(StoreFailure("\(file) is \(info.size) bytes, more than the 16 MiB a sessions file may be"))
        }
        guard let bytes = StorageFiles.readAll(fd, limit: Self.maximumFileSize) else {
            return .failure(StoreFailure("\(file) cannot be read: \(StorageFiles.errorText())"))
        }
        guard bytes.count <= Self.maximumFileSize else {
            return .failure(StoreFailure("\(file) is more than the 16 MiB a sessions file may be"))
        }
        return Self.openSealed(bytes, uid: uid, key: key, file: file)
    }

    /// The file format, without the file: a sealed file's bytes opened for `uid` with `key`.
    /// Any bytes give the sessions or a sentence naming `file`, never a trap (fuzzed:
    /// `scripts/fuzz session-file`).
    static func openSealed(_ bytes: [UInt8], uid: UInt32, key: StorageKey, file: String) -> Result<[PersistedSession], StoreFailure> {
        // Magic, nonce and tag; an empty list is never written, so anything this short is damaged.
        guard bytes.count >= Self.magic.count + 12 + 16 else {
            return .failure(StoreFailure("\(file) is too short to be a sessions file (\(bytes.count) bytes)"))
        }
        guard bytes.starts(with: Self.magic) else {
            return .failure(StoreFailure("\(file) is not an authgate sessions file (it does not start with AGS1)"))
        }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(combined: bytes[Self.magic.count...])
            plaintext = try AES.GCM.open(box, using: key.symmetricKey, authenticating: authenticatedData(uid: uid))
        } catch {
            return .failure(StoreFailure("\(file) cannot be decrypted: it was written with another key, was damaged, "
                                         + "or belongs to another uid"))
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        do {
            let version = try decoder.decode(VersionProbe.self, from: plaintext).version
            guard version == Self.formatVersion else {
                return .failure(StoreFailure("\(file) is in format version \(version), which this authgate cannot read"))
            }
            let envelope = try decoder.decode(Envelope.self, from: plaintext)
            guard envelope.uid == uid else {
                return .failure(StoreFailure("\(file) holds the sessions of uid \(envelope.uid), not of uid \(uid)"))
            }
            return .success(envelope.sessions)
        } catch let error as DecodingError {
            // Only the coding path: the decoder's own messages may quote values, which could be tokens.
            return .failure(StoreFailure("\(file) decrypted, but its contents are not a valid sessions list (at \(Self.codingPath(error)))"))
        } catch {
            return .failure(StoreFailure("\(file) decrypted, but its contents are not a valid sessions list"))
        }
    }

    /// Where in the JSON decoding failed, as `sessions.0.grant`; keys only, never values.
    private static func codingPath(_ error: DecodingError) -> String {
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c): context = c
        case .keyNotFound(let key, let c):
            return (c.codingPath + [key]).map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        @unknown default: return "an unknown place"
        }
        let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        return path.isEmpty ? "the top level" : path
    }

    // MARK: - Files

    /// Checks that the sessions directory is the daemon's and private, creating it if asked.
    /// - Returns: Whether it exists.
    @discardableResult
    private func checkDirectory(create: Bool) throws(StorageError) -> Bool {
        if create, let problem = StorageFiles.createPrivateDirectory(directory) {
            throw StorageError(file: directory, "cannot create the sessions directory \(directory): \(problem)")
        }
        guard let info = StorageFiles.pathStatus(directory) else {
            if errno == ENOENT, !create { return false }
            throw StorageError(file: directory, "cannot use the sessions directory \(directory): \(StorageFiles.errorText())")
        }
        guard info.isDirectory else {
            throw StorageError(file: directory, "the sessions directory \(directory) is not a directory")
        }
        guard info.permissions & StorageFiles.groupAndOther == 0 else {
            let mode = String(info.permissions & 0o777, radix: 8)
            throw StorageError(file: directory, "the sessions directory \(directory) has mode \(mode), so other users may get in; "
                               + "it must be 0700 (chmod 700 \(directory))")
        }
        guard info.owner == geteuid() else {
            throw StorageError(file: directory, "the sessions directory \(directory) belongs to uid \(info.owner), not to the daemon's uid \(geteuid())")
        }
        return true
    }

    /// Replaces `uid`'s file with `bytes` atomically: a temporary file in the same directory
    /// (so the rename cannot cross file systems), synced, then renamed over the old one.
    private func write(_ bytes: [UInt8], uid: UInt32) throws(StorageError) {
        let file = path(uid: uid)
        guard let (fd, temporary) = StorageFiles.createTemporaryFile(prefix: "\(directory)/.\(uid)\(Self.temporaryMarker)") else {
            throw StorageError(file: file, "cannot create a temporary file to save \(file): \(StorageFiles.errorText())")
        }
        // mkstemp already uses 0600, less the umask; fchmod makes it exactly 0600. The sync
        // makes the contents durable before the rename makes them visible, so a crash cannot
        // leave an empty file under the real name.
        var written = fchmod(fd, 0o600) == 0 && StorageFiles.writeAll(fd, bytes) && StorageFiles.sync(fd)
        var problem = written ? nil : StorageFiles.errorText()
        // close can report a delayed write error (NFS, quotas).
        if close(fd) != 0, written {
            written = false
            problem = StorageFiles.errorText()
        }
        if written, rename(temporary, file) != 0 {
            written = false
            problem = StorageFiles.errorText()
        }
        guard written else {
            unlink(temporary)
            throw StorageError(file: file, "cannot save \(file): \(problem ?? "unknown error")")
        }
        // The rename is durable only once the directory is.
        if let failure = StorageFiles.syncDirectory(directory) {
            throw StorageError(file: file, "saved \(file), but syncing its directory failed: \(failure)")
        }
    }

    private func remove(uid: UInt32) throws(StorageError) {
        let file = path(uid: uid)
        if unlink(file) != 0 {
            if errno == ENOENT { return }
            throw StorageError(file: file, "cannot remove \(file): \(StorageFiles.errorText())")
        }
        // Without this, the file could come back after a crash with sessions the user ended.
        if let failure = StorageFiles.syncDirectory(directory) {
            throw StorageError(file: file, "removed \(file), but syncing its directory failed: \(failure)")
        }
    }
}

/// Why one sessions file cannot be used: a sentence naming the file.
struct StoreFailure: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}
