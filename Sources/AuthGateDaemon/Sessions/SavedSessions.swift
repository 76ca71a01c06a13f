import AuthGateCore
import Logging

/// The sealed copies of the `persistent` sessions, one file per uid, as the session manager
/// keeps them: which uids have a file, which could not be saved and why, and the writes.
///
/// A value the ``SessionManager`` actor owns: its state changes only on the actor, and a save
/// runs there, synchronously, so that a caller never holds a token whose refresh token the
/// disk does not know.
struct SavedSessions {
    /// Where `persistent` sessions are sealed; `nil` keeps everything in memory.
    let persistence: SessionPersistence?
    /// Where each write is counted and timed; `nil` where nothing is.
    let metrics: (any SessionWorkObserver)?
    let logger: Logger
    /// The uids that have a sessions file, so that the last persistent session's removal
    /// deletes it, and memory-only uids never cause a disk access.
    private var filed: Set<UInt32> = []
    /// The uids whose last save failed, with why (the disk is full, the directory is not
    /// writable, the store cannot be opened): their persistent sessions live in memory only,
    /// the old file intact, until a save succeeds. Said at sign-in and in `status`.
    private var unsaved: [UInt32: String] = [:]

    init(persistence: SessionPersistence?, metrics: (any SessionWorkObserver)?, logger: Logger) {
        self.persistence = persistence
        self.metrics = metrics
        self.logger = logger
    }

    /// Whether sessions are saved at all.
    var saves: Bool { persistence != nil }

    /// Why `uid`'s persistent sessions are in memory only, if its last save failed.
    func notSaved(uid: UInt32) -> String? { unsaved[uid] }

    /// `uid` has a sessions file (restored at start-up).
    mutating func restored(uid: UInt32) { filed.insert(uid) }

    /// Writes `uid`'s persistent sessions, the whole list (an empty one removes the file);
    /// nothing when the uid has neither sessions to save nor a file.
    mutating func save(_ list: [PersistedSession], uid: UInt32) {
        guard let persistence, !list.isEmpty || filed.contains(uid) else { return }
        guard let store = persistence.store() else {
            // SessionPersistence logged why.
            unsaved[uid] = "the session store cannot be opened (the daemon's log says why)"
            return
        }
        let start = ContinuousClock.now
        do {
            try store.save(list, uid: uid)
            metrics?.storeWrite(succeeded: true, duration: .now - start)
            unsaved[uid] = nil
            if list.isEmpty { filed.remove(uid) } else { filed.insert(uid) }
        } catch {
            metrics?.storeWrite(succeeded: false, duration: .now - start)
            unsaved[uid] = "\(error)"
            logger.error("cannot save sessions; they stay in memory: \(error)", metadata: ["peer.uid": "\(uid)"])
        }
    }
}
