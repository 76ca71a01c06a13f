import AuthGateCore
import FoundationEssentials
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// What consent remembers across restarts, in the state directory's `consent.json` (0600, the
/// daemon's own): the programs the user allowed from now on ("always"). No token, no secret:
/// names, paths and digests. A session's own choice to ask (`login --confirm`) is not here but
/// in the session's record, so it lives and ends with the session, and a lost or unreadable
/// file only makes programs be asked again.
struct ConsentRecords: Codable, Sendable, Equatable {
    /// A choice made at sign-in, as version 1 of the file kept them: read once, to be applied to
    /// the sessions restored at start-up, and never written again.
    struct ChosenSession: Codable, Sendable, Hashable {
        var uid: UInt32
        var provider: String
        var session: String
    }

    /// An "always" answer: this program's file, as it was when allowed (its SHA-256), for this
    /// user's session.
    struct Allowed: Codable, Sendable, Hashable {
        var uid: UInt32
        var provider: String
        var session: String
        /// The program's path: the executable, or the script an interpreter runs.
        var executable: String
        var interpreter: String?
        /// SHA-256 of the file's content, hex; version 1's answers have none and allow nothing.
        var digest: String?
        /// Seconds since 1970.
        var grantedAt: Int64

        enum CodingKeys: String, CodingKey {
            case uid, provider, session, executable, interpreter, digest
            case grantedAt = "granted_at"
        }

        /// Whether this answer allows `program` for `key`: the same path, with the same content.
        func covers(_ key: SessionKey, _ program: ConsentProgram) -> Bool {
            guard let digest, program.digest == digest else { return false }
            return uid == key.uid && provider == key.provider.rawValue && session == key.name.rawValue && executable == program.path
                && interpreter == program.interpreter
        }
    }

    var version = 2
    var confirmSessions: [ChosenSession] = []
    var allowed: [Allowed] = []

    enum CodingKeys: String, CodingKey {
        case version
        case confirmSessions = "confirm_sessions"
        case allowed
    }

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        confirmSessions = try container.decodeIfPresent([ChosenSession].self, forKey: .confirmSessions) ?? []
        allowed = try container.decodeIfPresent([Allowed].self, forKey: .allowed) ?? []
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        if !confirmSessions.isEmpty { try container.encode(confirmSessions, forKey: .confirmSessions) }
        try container.encode(allowed, forKey: .allowed)
    }

    /// "Always" answers one uid keeps (its oldest go first), and answers in all.
    static let limitPerUser = 64
    static let limit = 10_000

    static let fileName = "consent.json"

    /// Drops `uid`'s oldest answers beyond ``limitPerUser``, then the oldest of all beyond ``limit``.
    mutating func keepWithinLimits(newest uid: UInt32) {
        let mine = allowed.indices.filter { allowed[$0].uid == uid }
        if mine.count > Self.limitPerUser {
            let dropped = Set(mine.prefix(mine.count - Self.limitPerUser))
            allowed = allowed.enumerated().filter { !dropped.contains($0.offset) }.map(\.element)
        }
        allowed = Array(allowed.suffix(Self.limit))
    }

    /// The records in `directory`'s file; none when there is no file. A file that cannot be
    /// read or decoded is renamed aside (`consent.json.unreadable`, said in the log) rather than
    /// overwritten by the next change, and every program is asked again meanwhile (sessions
    /// keep asking: their choice is in their own record). Version 1's "always" answers, keyed
    /// on a file's inode, which a later file can take, are dropped: those programs are asked again.
    static func load(from directory: String, logger: Logger) -> ConsentRecords {
        let path = directory + "/" + fileName
        let fd = StorageFiles.openFile(path, noFollow: true)
        guard fd >= 0 else {
            if errno != ENOENT {
                logger.error("consent answers unreadable; every program is asked again", metadata: ["file": "\(path)", "error": "\(StorageFiles.errorText())"])
            }
            return ConsentRecords()
        }
        defer { close(fd) }
        if let bytes = StorageFiles.readAll(fd, limit: 8 << 20), var records = try? JSONDecoder().decode(ConsentRecords.self, from: Data(bytes)),
            records.version == 1 || records.version == 2
        {
            let before = records.allowed.count
            records.allowed.removeAll { $0.digest == nil }
            if records.allowed.count < before {
                logger.notice(
                    "consent answers of an earlier version dropped; those programs are asked again",
                    metadata: ["consent.dropped": "\(before - records.allowed.count)"]
                )
            }
            records.version = 2
            return records
        }
        let aside = path + ".unreadable"
        rename(path, aside)
        logger.error("consent answers unreadable; moved aside, every program is asked again", metadata: ["file": "\(aside)"])
        return ConsentRecords()
    }

    /// Replaces the file atomically (temporary file, fsync, rename, fsync of the directory).
    func save(to directory: String) -> String? {
        if let problem = StorageFiles.createPrivateDirectory(directory) { return problem }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "cannot encode the consent answers" }
        let path = directory + "/" + Self.fileName
        switch StorageFiles.writeTemporaryFile(Array(data), prefix: path + ".tmp.") {
        case .failure(let problem):
            return problem.text
        case .success(let temporary):
            guard rename(temporary, path) == 0 else {
                let problem = StorageFiles.errorText()
                unlink(temporary)
                return problem
            }
            return StorageFiles.syncDirectory(directory)
        }
    }
}
