import Logging
import Synchronization

/// Opens the encrypted ``SessionStore`` the first time a `persistent` provider needs it, so
/// that a daemon with only `memory` providers (the default) never touches the disk.
///
/// A key that cannot be read or created is logged once per attempt, and persistent
/// sessions then live in memory only: the daemon keeps working, and says what to fix.
final class SessionPersistence: Sendable {
    private let stateDirectory: String
    private let keeper: StorageKeyKeeper
    private let logger: Logger
    private let opened = Mutex<(store: SessionStore, location: KeyLocation)?>(nil)
    /// Why the store could not be opened the last time it was tried.
    private let failure = Mutex<String?>(nil)
    /// One `rekey` at a time.
    private let rekeying = Mutex(())
    /// A key change not finished — one start-up found, or a `rekey` cut short (a file it could
    /// not read or write, the keyring out of reach): a `rekey` finishes it first, so that no file
    /// sealed with its key is left behind when a newer key takes the place of the next one.
    private let unfinished = Mutex<StorageKeyKeeper.Opened?>(nil)

    /// How the store opens a sessions file for reading (a test's failing disk).
    private let openForReading: @Sendable (String) -> Int32

    /// - Parameter keeper: Where the key is found (the credential, the keyring, the file).
    init(
        keeper: StorageKeyKeeper,
        logger: Logger,
        openForReading: @escaping @Sendable (String) -> Int32 = { StorageFiles.openFile($0, noFollow: true) }
    ) {
        self.stateDirectory = keeper.stateDirectory
        self.keeper = keeper
        self.logger = logger
        self.openForReading = openForReading
    }

    /// Why the store could not be opened the last time it was tried (`nil` once it opened).
    var openFailure: String? { failure.withLock { $0 } }

    /// The uids that have a sealed sessions file (for telling them when their sessions cannot
    /// be opened).
    var uidsWithSavedSessions: [UInt32] { keeper.uidsWithSealedSessions }

    /// Where the key of the open store lives; `nil` before the store is opened.
    var keyLocation: KeyLocation? {
        opened.withLock { $0?.location }
    }

    /// The store, opened (and its key found or created) on first use; `nil` when that failed.
    func store() -> SessionStore? {
        opened.withLock { opened in
            if let opened { return opened.store }
            do throws(StorageError) {
                let key = try keeper.open()
                for notice in key.notices {
                    logger.notice("\(notice)", metadata: ["storage.key": "\(key.location.kind)"])
                }
                let store = SessionStore(stateDirectory: stateDirectory, key: key.sealing, openingKeys: key.opening, openForReading: openForReading)
                if key.finish != nil || !key.opening.isEmpty { finishKeyChange(key, store: store) }
                opened = (store, key.location)
                failure.withLock { $0 = nil }
                logger.info(
                    "session store opened",
                    metadata: [
                        "storage.directory": "\(stateDirectory)/sessions",
                        "storage.key": "\(key.location.kind)",
                    ]
                )
                return store
            } catch {
                failure.withLock { $0 = "\(error)" }
                logger.error(
                    "persistent sessions cannot be stored; they will live in memory only until this is fixed: \(error)",
                    metadata: ["storage.directory": "\(stateDirectory)"]
                )
                return nil
            }
        }
    }

    /// Seals every file with the key found and ends the change start-up found: an interrupted
    /// rekey, or a key that moved into the keyring. A failure is logged and leaves the opening
    /// keys in the store, so every file still opens; the next start tries again.
    private func finishKeyChange(_ key: StorageKeyKeeper.Opened, store: SessionStore) {
        do throws(StorageError) {
            try finishKeyChangeOrThrow(key, store: store)
        } catch {
            unfinished.withLock { $0 = key }
            logger.error("the storage key change could not be finished; a rekey or the next start tries again: \(error)")
        }
    }

    private func finishKeyChangeOrThrow(_ key: StorageKeyKeeper.Opened, store: SessionStore) throws(StorageError) {
        let report = try store.reseal(with: key.sealing)
        try keeper.finish(key)
        logger.notice(
            "storage key change finished",
            metadata: [
                "storage.key": "\(key.location.kind)",
                "sessions.files": "\(report.files)",
            ]
        )
    }

    /// What `rekey` did.
    struct RekeyOutcome: Sendable {
        var location: KeyLocation
        var report: SessionStore.ResealReport
    }

    /// Seals every uid's sessions with a new key, then makes it the key.
    ///
    /// Order, so that a crash at any point loses nothing: (1) the new key is stored beside the
    /// current one (`authgate.key.next`, or the keyring item `kind=storage-key-next`); (2) every
    /// file is sealed again with it, each replaced atomically; (3) the new key replaces the
    /// current one (a rename, or the keyring item) and the old one is gone. A start that finds
    /// a next key opens files with either key and finishes (2) and (3).
    /// - Throws: The step that failed, as a sentence; a systemd credential is refused (it is
    ///   read-only), with how to rotate it.
    func rekey() throws(StorageError) -> RekeyOutcome {
        try rekeying.withLock { _ throws(StorageError) in
            guard let store = store(), let location = keyLocation else {
                throw StorageError(file: stateDirectory, "the session store cannot be opened (the daemon's log says why)")
            }
            if case .credential(let path) = location { throw StorageError(file: path, StorageKeyKeeper.credentialRefusal(path)) }
            if let change = unfinished.withLock({ $0 }) {
                do throws(StorageError) {
                    try finishKeyChangeOrThrow(change, store: store)
                } catch {
                    throw StorageError(
                        file: error.file,
                        "an earlier key change is not finished, and a new key now could lose the files sealed with its key: \(error.message)"
                    )
                }
                unfinished.withLock { $0 = nil }
            }
            let key = StorageKey.generate()
            try keeper.storeNext(key, at: location)
            // From here on the new key is the next one: a step that fails leaves this change for
            // the next rekey (or start) to finish before any other key takes its place.
            let pending = StorageKeyKeeper.Opened(location: location, sealing: key, finish: .promote)
            let report: SessionStore.ResealReport
            do throws(StorageError) {
                report = try store.reseal(with: key)
            } catch {
                unfinished.withLock { $0 = pending }
                throw error
            }
            do throws(StorageError) {
                try keeper.promote(key, at: location)
            } catch {
                unfinished.withLock { $0 = pending }
                throw StorageError(
                    file: error.file,
                    "\(error.message). Every sessions file is sealed with the new key, which is kept "
                        + "as the next key: the next start makes it the current one"
                )
            }
            for problem in report.unreadable {
                logger.warning("rekey: a sessions file no key opens was left as it is: \(problem)")
            }
            logger.notice(
                "storage rekeyed",
                metadata: [
                    "storage.key": "\(location.kind)", "sessions.files": "\(report.files)",
                    "sessions.count": "\(report.sessions)",
                ]
            )
            return RekeyOutcome(location: location, report: report)
        }
    }
}
