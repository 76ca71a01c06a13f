import Logging
import Synchronization

/// Opens the encrypted ``SessionStore`` the first time a `persistent` provider needs it, so
/// that a daemon with only `memory` providers (the default) never touches the disk.
///
/// A key that cannot be read or created is logged once per attempt, and persistent
/// sessions then live in memory only: the daemon keeps working, and says what to fix.
final class SessionPersistence: Sendable {
    private let stateDirectory: String
    private let credentialsDirectory: String?
    private let logger: Logger
    private let opened = Mutex<SessionStore?>(nil)

    /// - Parameter credentialsDirectory: systemd's `$CREDENTIALS_DIRECTORY`, where a
    ///   `LoadCredential=authgate.key:…` puts the key.
    init(stateDirectory: String, credentialsDirectory: String?, logger: Logger) {
        self.stateDirectory = stateDirectory
        self.credentialsDirectory = credentialsDirectory
        self.logger = logger
    }

    /// The store, opened (and its key created) on first use; `nil` when that failed.
    func store() -> SessionStore? {
        opened.withLock { store in
            if let store { return store }
            do {
                let key = try StorageKey.load(stateDirectory: stateDirectory, credentialsDirectory: credentialsDirectory)
                store = SessionStore(stateDirectory: stateDirectory, key: key)
                logger.info("session store opened", metadata: ["storage.directory": "\(stateDirectory)/sessions"])
            } catch {
                logger.error("persistent sessions cannot be stored; they will live in memory only until this is fixed: \(error)",
                             metadata: ["storage.directory": "\(stateDirectory)"])
            }
            return store
        }
    }
}
