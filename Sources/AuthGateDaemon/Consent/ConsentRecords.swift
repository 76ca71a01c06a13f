import AuthGateCore
import FoundationEssentials
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// What consent remembers across restarts, in the state directory's `consent.json` (0600, the
/// daemon's own): the sessions whose user chose consent at sign-in, and the executables the user
/// allowed from now on. No token, no secret: names, paths and file identities.
struct ConsentRecords: Codable, Sendable, Equatable {
    struct ChosenSession: Codable, Sendable, Hashable {
        var uid: UInt32
        var provider: String
        var session: String
    }

    /// An "always" answer: this executable file, for this user's session.
    struct Allowed: Codable, Sendable, Hashable {
        var uid: UInt32
        var provider: String
        var session: String
        var executable: String
        var device: UInt64
        var inode: UInt64
        /// Seconds since 1970.
        var grantedAt: Int64

        enum CodingKeys: String, CodingKey {
            case uid, provider, session, executable, device, inode
            case grantedAt = "granted_at"
        }
    }

    var version = 1
    var confirmSessions: [ChosenSession] = []
    var allowed: [Allowed] = []

    enum CodingKeys: String, CodingKey {
        case version
        case confirmSessions = "confirm_sessions"
        case allowed
    }

    /// At most this many records of each kind are kept (the oldest answers go first).
    static let limit = 10_000

    static let fileName = "consent.json"

    /// The records in `directory`'s file; none when there is no file. A file that cannot be
    /// read or decoded is renamed aside (`consent.json.unreadable`, said in the log) rather than
    /// overwritten by the next change: the user's answers are not silently lost, and every
    /// question is asked again meanwhile.
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
        if let bytes = StorageFiles.readAll(fd, limit: 8 << 20), let records = try? JSONDecoder().decode(ConsentRecords.self, from: Data(bytes)),
            records.version == 1
        {
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
