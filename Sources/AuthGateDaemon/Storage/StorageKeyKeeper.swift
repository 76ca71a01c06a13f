import AuthGateCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Where the storage key may be kept (`authgated --key-store`).
public enum KeyStoreChoice: String, Sendable, CaseIterable {
    /// The systemd credential when there is one; else, for a per-user daemon whose session has
    /// a Secret Service, the keyring; else the state directory's file.
    case auto
    /// The state directory's file (or the credential), never the keyring.
    case file
    /// The Secret Service (or the credential), never the file: without a keyring, persistent
    /// sessions stay in memory.
    case secretService = "secret-service"
}

/// Where the key in use lives.
enum KeyLocation: Sendable, Equatable {
    /// `$CREDENTIALS_DIRECTORY/authgate.key`: read-only to the daemon.
    case credential(path: String)
    case secretService
    case file(path: String)

    /// How `daemon.info` names it: `credential`, `secret-service` or `file`.
    var kind: String {
        switch self {
        case .credential: "credential"
        case .secretService: "secret-service"
        case .file: "file"
        }
    }

    /// For the log: the path, or the Secret Service item.
    var text: String {
        switch self {
        case .credential(let path): "the systemd credential \(path)"
        case .secretService: SecretServiceKeyring.locationText
        case .file(let path): path
        }
    }
}

/// Finds the storage key where ``KeyStoreChoice`` says, creates it on first use, replaces the
/// state directory's key by a new one in the user's keyring, and stores the keys of a `rekey`.
///
/// Order: the systemd credential (system service) > the Secret Service (per-user daemon,
/// `auto` or `secret-service`) > `<state directory>/authgate.key`. What a copy of the state
/// directory (a backup, a synced home) holds is then sealed files without their key.
///
/// Everything here runs child processes or touches files, synchronously: callers are start-up
/// and `rekey`, off the event loops.
struct StorageKeyKeeper: Sendable {
    var stateDirectory: String
    var credentialsDirectory: String?
    var choice: KeyStoreChoice = .auto
    var mode: DaemonMode = .user
    /// The daemon's environment: the session bus, `PATH`, `AUTHGATE_SECRET_TOOL`.
    var environment: [String: String] = [:]
    /// How long one `secret-tool` call may take.
    var keyringTimeout: Duration = .seconds(5)

    /// The key found, and what start-up must finish before it is the only one.
    struct Opened: Sendable {
        /// Where the key lives.
        var location: KeyLocation
        /// The key files must be sealed with: the current one, or the new key of a `rekey`
        /// that a crash interrupted.
        var sealing: StorageKey
        /// Keys that may have sealed some files: the current key while `sealing` is a new one,
        /// the state directory's key as it moves into the keyring, a previous credential.
        var opening: [StorageKey] = []
        /// What to do once every file is sealed with `sealing`.
        var finish: Finish?
        /// What the log should say (where the key is, a fallback and why, a migration).
        var notices: [String] = []
    }

    /// The step that ends a key change once every file is sealed with the new key.
    enum Finish: Sendable, Equatable {
        /// A `rekey` was interrupted: make its new key the current one.
        case promote
        /// The keyring holds the key: the state directory's old file goes.
        case removeStateFile
    }

    var stateKeyPath: String { stateDirectory + "/" + StorageKey.fileName }
    var nextKeyPath: String { stateDirectory + "/" + StorageKey.nextFileName }
    private var credentialPath: String? {
        credentialsDirectory.flatMap { $0.isEmpty ? nil : $0 + "/" + StorageKey.fileName }
    }

    /// Finds (or creates) the key.
    /// - Throws: When no key can be used: the credential or the key file is unusable, the
    ///   Secret Service is required (`secret-service`) but fails, or falling back to a new
    ///   file key would make saved sessions unreadable.
    func open() throws(StorageError) -> Opened {
        if let credentialPath, let key = try StorageKey.readCredential(credentialPath) {
            // A second credential, authgate.key.previous, lets an administrator rotate the
            // credential: files it sealed are opened with it and sealed again with the new one.
            var opened = Opened(location: .credential(path: credentialPath), sealing: key)
            if let previous = try StorageKey.readCredential(credentialPath + ".previous"), previous != key {
                opened.opening = [previous]
            }
            opened.notices.append("the storage key is \(opened.location.text)")
            return opened
        }
        if let problem = StorageFiles.createPrivateDirectory(stateDirectory) {
            throw StorageError(file: stateDirectory, "cannot create the state directory \(stateDirectory): \(problem)")
        }
        let useKeyring = choice == .secretService || (choice == .auto && mode == .user)
        guard useKeyring else { return try openFile(notices: ["the storage key is kept in \(stateKeyPath)"]) }
        switch SecretServiceKeyring.find(environment: environment) {
        case .failure(let failure):
            return try fallBack("the Secret Service cannot be used: \(failure)")
        case .success(var keyring):
            keyring.timeout = keyringTimeout
            return try openKeyring(keyring)
        }
    }

    /// The keyring's key; the state directory's key moved into it; or a new one stored in it.
    private func openKeyring(_ keyring: SecretServiceKeyring) throws(StorageError) -> Opened {
        let current: StorageKey?
        switch keyring.lookup(.current) {
        case .failure(let failure): return try fallBack("the Secret Service failed: \(failure)")
        case .success(let found): current = found
        }
        let stateKey = try StorageKey.readStateKey(stateKeyPath)
        if let current {
            var opened = Opened(location: .secretService, sealing: current)
            if case .success(let next?) = keyring.lookup(.next), next != current {
                // A rekey stored its new key and then stopped: finish it.
                opened = Opened(
                    location: .secretService,
                    sealing: next,
                    opening: [current],
                    finish: .promote,
                    notices: ["an interrupted rekey is finished: every sessions file is sealed again with its new key"]
                )
            }
            if let stateKey, stateKey != current {
                // Sessions sealed while the keyring could not be reached (the file fallback):
                // they are opened with the file's key and sealed again with the keyring's.
                opened.opening.append(stateKey)
                opened.finish = opened.finish ?? .removeStateFile
                opened.notices.append(
                    "both the Secret Service and \(stateKeyPath) hold a storage key; the keyring's is used, "
                        + "sessions sealed with the file's are sealed again, and the file is then removed"
                )
            } else if stateKey != nil {
                opened.finish = opened.finish ?? .removeStateFile
                opened.notices.append("\(stateKeyPath) holds the same key as the Secret Service; the file is removed")
            }
            opened.notices.append("the storage key is kept in \(SecretServiceKeyring.locationText)")
            return opened
        }
        if let stateKey {
            // Migration, as a rekey: a new key into the keyring (not the file's: every earlier
            // copy of the file, in a backup or a synced home, would still open what is sealed
            // from now on), every session file sealed again with it, and then the file removed
            // (finish). A crash between the steps leaves the keyring's key and the file's, which
            // the branch above finishes at the next start.
            if StorageFiles.pathStatus(nextKeyPath) != nil {
                return try fallBack("a rekey of \(stateKeyPath) was interrupted; it is finished with the file before the key moves")
            }
            let key = StorageKey.generate()
            switch keyring.storeAndVerify(key, as: .current) {
            case .failure(let failure):
                return try fallBack("the key could not be moved into the Secret Service: \(failure)")
            case .success:
                return Opened(
                    location: .secretService,
                    sealing: key,
                    opening: [stateKey],
                    finish: .removeStateFile,
                    notices: [
                        "the storage key was moved from \(stateKeyPath) into \(SecretServiceKeyring.locationText) as a new key; "
                            + "the sessions are sealed again with it and the file is removed"
                    ]
                )
            }
        }
        if hasSealedSessions {
            // Their key is not here: a dismissed unlock prompt answers like "no such item".
            return try fallBack("the Secret Service holds no storage key (or did not unlock), yet saved sessions exist")
        }
        let key = StorageKey.generate()
        switch keyring.storeAndVerify(key, as: .current) {
        case .failure(let failure):
            return try fallBack("a new key could not be stored in the Secret Service: \(failure)")
        case .success:
            return Opened(
                location: .secretService,
                sealing: key,
                notices: ["a new storage key was created in \(SecretServiceKeyring.locationText)"]
            )
        }
    }

    /// The state directory's key after the Secret Service failed (`auto`), or the failure
    /// (`secret-service`).
    private func fallBack(_ reason: String) throws(StorageError) -> Opened {
        guard choice == .auto else {
            throw StorageError(file: stateDirectory, "--key-store secret-service: \(reason)")
        }
        if StorageFiles.pathStatus(stateKeyPath) == nil, StorageFiles.pathStatus(nextKeyPath) == nil, hasSealedSessions {
            // The saved sessions were sealed with a key this session cannot reach (the keyring's,
            // most likely): a new file key would make them unreadable for good.
            throw StorageError(
                file: stateKeyPath,
                "\(reason); saved sessions exist in \(stateDirectory)/sessions but \(stateKeyPath) does not, "
                    + "so their key is elsewhere (the Secret Service?): not creating a new key that would lose them. "
                    + "Start authgated where the keyring can be reached, or remove \(stateDirectory)/sessions to start afresh"
            )
        }
        return try openFile(notices: ["\(reason); the storage key is kept in \(stateKeyPath) instead"])
    }

    /// The state directory's key (created on first use), with an interrupted rekey's new key.
    private func openFile(notices: [String]) throws(StorageError) -> Opened {
        let current = try StorageKey.readStateKey(stateKeyPath)
        if let next = try StorageKey.readStateKey(nextKeyPath) {
            return Opened(
                location: .file(path: stateKeyPath),
                sealing: next,
                opening: current.map { [$0] } ?? [],
                finish: .promote,
                notices: notices + ["an interrupted rekey is finished: every sessions file is sealed again with its new key"]
            )
        }
        if let current { return Opened(location: .file(path: stateKeyPath), sealing: current, notices: notices) }
        if hasSealedSessions {
            // Their key went (a credential not given this time, a file removed): a new key would
            // have every file moved aside as unreadable, and the next start's key moving the
            // files sealed meanwhile over them.
            throw StorageError(
                file: stateKeyPath,
                "saved sessions exist in \(stateDirectory)/sessions but no key to open them (\(stateKeyPath) is missing, and no credential was given): "
                    + "not creating a new key that would lose them. Give the key back (the systemd credential, or the file from a backup), "
                    + "or move \(stateDirectory)/sessions aside to start afresh"
            )
        }
        let key = try StorageKey.create(stateKeyPath, in: stateDirectory)
        return Opened(location: .file(path: stateKeyPath), sealing: key, notices: notices)
    }

    /// The uids that have a sealed file in `sessions/`, by the files' names only.
    var uidsWithSealedSessions: [UInt32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: stateDirectory + "/sessions")) ?? []
        return names.compactMap(SessionStore.uid(fileName:)).sorted()
    }

    /// Whether `sessions/` holds a sealed file.
    private var hasSealedSessions: Bool { !uidsWithSealedSessions.isEmpty }

    // MARK: - Key changes

    /// The keyring, when the key lives there.
    private func keyring() throws(StorageError) -> SecretServiceKeyring {
        switch SecretServiceKeyring.find(environment: environment) {
        case .failure(let failure): throw StorageError(file: stateDirectory, "the Secret Service cannot be used: \(failure)")
        case .success(var keyring):
            keyring.timeout = keyringTimeout
            return keyring
        }
    }

    /// Keeps `key` beside the current one, as the key a `rekey` is moving to: until
    /// ``promote(_:at:)``, a start opens files with either and finishes the change.
    func storeNext(_ key: StorageKey, at location: KeyLocation) throws(StorageError) {
        switch location {
        case .credential(let path):
            throw StorageError(file: path, Self.credentialRefusal(path))
        case .file:
            try StorageKey.write(key, to: nextKeyPath, in: stateDirectory)
        case .secretService:
            if case .failure(let failure) = try keyring().storeAndVerify(key, as: .next) {
                throw StorageError(file: stateDirectory, "the new key could not be stored in the Secret Service: \(failure)")
            }
        }
    }

    /// Makes `key` (stored by ``storeNext(_:at:)``) the current key and forgets the old one.
    func promote(_ key: StorageKey, at location: KeyLocation) throws(StorageError) {
        switch location {
        case .credential(let path):
            throw StorageError(file: path, Self.credentialRefusal(path))
        case .file:
            try StorageKey.rename(nextKeyPath, to: stateKeyPath, in: stateDirectory)
        case .secretService:
            let keyring = try keyring()
            if case .failure(let failure) = keyring.storeAndVerify(key, as: .current) {
                throw StorageError(file: stateDirectory, "the new key could not replace the current one in the Secret Service: \(failure)")
            }
            // Not fatal: a leftover next item equal to the current key changes nothing at start.
            _ = keyring.clear(.next)
        }
    }

    /// Ends a key change that start-up found (``Opened/finish``), once every file is sealed
    /// with `opened.sealing`.
    func finish(_ opened: Opened) throws(StorageError) {
        switch opened.finish {
        case nil: return
        case .promote?: try promote(opened.sealing, at: opened.location)
        case .removeStateFile?:
            try StorageKey.remove(stateKeyPath, in: stateDirectory)
        }
    }

    /// Why a credential key cannot be rekeyed, and how to rotate it instead.
    static func credentialRefusal(_ path: String) -> String {
        "The storage key is the systemd credential \(path), which authgated can only read. To rotate it, make a new "
            + "credential (systemd-creds encrypt), give it to the service as authgate.key and the old one as authgate.key.previous, "
            + "and restart: the sessions are sealed again with the new key at start; then drop authgate.key.previous."
    }
}
