import AuthGateCore
import CLinux
import Crypto
import FoundationEssentials
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Memory-only sessions across a restart of the service (an upgrade, `systemctl restart`),
/// without a byte of them on disk: handed to systemd's file descriptor store.
///
/// At a graceful stop under systemd, the sessions of `"storage": "memory"` providers, with their
/// refresh schedules, are sealed (AES-256-GCM) into a memfd under a new random key, which goes
/// into a second memfd; both are sealed against change and sent to the service manager with
/// `FDSTORE=1` (`sd_pid_notify_with_fds(3)`), named ``sessionsName`` and ``keyName``. systemd
/// keeps them while the service restarts and passes them to the next start (`LISTEN_FDS`,
/// `LISTEN_FDNAMES`); a `systemctl stop`, which is not followed by a start, empties the store
/// (`FileDescriptorStorePreserve=no`), and a reboot loses it, so memory sessions end there as
/// promised. The next start takes them back and removes them from the store at once
/// (`FDSTOREREMOVE=1`), so a crash later cannot bring back tokens since refreshed. Anything that
/// is not exactly what this wrote — another kind of descriptor, an unsealed memfd, bytes that do
/// not open under the key — is refused with a warning, and the daemon starts without them.
///
/// The unit must allow it (`FileDescriptorStoreMax=`); without `$NOTIFY_SOCKET` nothing is sent.
enum SessionHandover {
    static let sessionsName = "authgate-sessions"
    static let keyName = "authgate-sessions-key"
    static let magic: [UInt8] = Array("AGH1".utf8)
    /// A handover larger than this is not sent, and not read.
    static let maximumSize = 64 << 20

    /// One session handed over: whose, the session as a persistent one is saved, and when it
    /// was to be refreshed next.
    struct Entry: Codable, Sendable, Equatable {
        var uid: UInt32
        var session: PersistedSession
        var nextRefreshAt: Date?

        enum CodingKeys: String, CodingKey {
            case uid, session
            case nextRefreshAt = "next_refresh_at"
        }
    }

    private struct Envelope: Codable {
        var version: Int
        var sessions: [Entry]
    }

    private static let authenticatedData = Data("authgate session handover v1".utf8)

    // MARK: Stopping

    /// Seals `entries` and hands them to the service manager; what went wrong, or `nil`.
    static func store(_ entries: [Entry], notifier: SystemdNotifier) -> String? {
        guard notifier.isEnabled, !entries.isEmpty else { return nil }
        let key = SymmetricKey(size: .bits256)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let sealed: [UInt8]
        do {
            let plaintext = try encoder.encode(Envelope(version: 1, sessions: entries))
            let box = try AES.GCM.seal(plaintext, using: key, authenticating: authenticatedData)
            guard let combined = box.combined else { return "cannot seal the sessions" }
            sealed = magic + Array(combined)
        } catch {
            return "cannot seal the sessions"
        }
        guard sealed.count <= maximumSize else { return "the sessions are larger than \(maximumSize >> 20) MiB" }
        let keyBytes = key.withUnsafeBytes { Array($0) }
        let sessionsFD = ag_sealed_memfd(sessionsName, sealed, sealed.count)
        guard sessionsFD >= 0 else { return "cannot make a memfd: \(StorageFiles.errorText())" }
        defer { close(sessionsFD) }
        let keyFD = ag_sealed_memfd(keyName, keyBytes, keyBytes.count)
        guard keyFD >= 0 else { return "cannot make a memfd: \(StorageFiles.errorText())" }
        defer { close(keyFD) }
        // FDPOLL=0: a memfd is not a socket to watch for hang-ups.
        for (name, fd) in [(sessionsName, sessionsFD), (keyName, keyFD)] {
            if let problem = notifier.send("FDSTORE=1\nFDNAME=\(name)\nFDPOLL=0", descriptors: [fd]) { return problem }
        }
        return nil
    }

    // MARK: Starting

    /// Why descriptors handed over were refused.
    struct Refused: Error, CustomStringConvertible {
        var description: String
    }

    /// The sessions in the descriptors named ``sessionsName`` and ``keyName`` among those
    /// systemd passed; closes them and asks the service manager to forget them. `nil` when none
    /// were passed.
    static func take(_ stored: [String: Int32], notifier: SystemdNotifier) -> Result<[Entry], Refused>? {
        let sessionsFD = stored[sessionsName]
        let keyFD = stored[keyName]
        guard sessionsFD != nil || keyFD != nil else { return nil }
        defer {
            for fd in [sessionsFD, keyFD].compactMap({ $0 }) { close(fd) }
            for name in [sessionsName, keyName] { _ = notifier.send("FDSTOREREMOVE=1\nFDNAME=\(name)") }
        }
        guard let sessionsFD, let keyFD else {
            return .failure(Refused(description: "only one of \(sessionsName) and \(keyName) was passed"))
        }
        return Result(catching: { () throws(Refused) in try open(sessions: try contents(of: sessionsFD), key: try contents(of: keyFD)) })
    }

    /// What a descriptor holds, when it is a memfd sealed against change of at most ``maximumSize``.
    private static func contents(of fd: Int32) throws(Refused) -> [UInt8] {
        guard let info = StorageFiles.fileStatus(fd), info.isRegularFile else {
            throw Refused(description: "a descriptor passed under its name is not a file")
        }
        guard ag_is_sealed_memfd(fd) == 1 else {
            throw Refused(description: "a descriptor passed under its name is not a sealed memfd (another program's, or changed since)")
        }
        guard info.size <= Int64(maximumSize) else { throw Refused(description: "the handover is larger than \(maximumSize >> 20) MiB") }
        var bytes = [UInt8](repeating: 0, count: Int(info.size))
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw Refused(description: "cannot read a descriptor passed: \(StorageFiles.errorText())") }
            done += count
        }
        return bytes
    }

    /// The sessions, opened with the key; any other bytes are refused, never a trap.
    static func open(sessions: [UInt8], key: [UInt8]) throws(Refused) -> [Entry] {
        guard key.count == 32 else { throw Refused(description: "the key passed is not an AES-256 key") }
        guard sessions.starts(with: magic) else { throw Refused(description: "the sessions passed are not authgate's handover") }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(combined: Data(sessions.dropFirst(magic.count)))
            plaintext = try AES.GCM.open(box, using: SymmetricKey(data: key), authenticating: authenticatedData)
        } catch {
            throw Refused(description: "the sessions passed do not open under the key passed with them")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let envelope = try? decoder.decode(Envelope.self, from: plaintext), envelope.version == 1 else {
            throw Refused(description: "the sessions passed are of an unknown version")
        }
        return envelope.sessions
    }
}
