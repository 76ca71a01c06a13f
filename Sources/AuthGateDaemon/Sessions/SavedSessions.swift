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
    /// Saved sessions this daemon does not use now, per uid, written back with each save of
    /// their uid so that nothing on disk is lost: those whose provider's file is there but
    /// cannot be used (invalid, a secret missing) until a reload makes it usable or removes
    /// it (``release(provider:)``), and those of files the daemon could not read at start
    /// (the store did not open then, no provider kept sessions on disk, or the file itself
    /// could not be read) until a restart.
    private var held: [UInt32: [PersistedSession]] = [:]
    /// Whether every uid's file was read (at start); until then the first save reads them,
    /// so that no file is written over unread.
    private var readAll = false

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

    /// Every uid's file was read (start-up restored them).
    mutating func allRead() { readAll = true }

    /// Keeps `session` of `uid` on disk, unused (see ``held``).
    mutating func hold(_ session: PersistedSession, uid: UInt32) { held[uid, default: []].append(session) }

    /// Takes the held sessions of `provider` out, by uid: for a reload to restore or drop.
    mutating func release(provider: String) -> [UInt32: [PersistedSession]] {
        var released: [UInt32: [PersistedSession]] = [:]
        for (uid, list) in held {
            let (taken, kept) = (list.filter { $0.provider == provider }, list.filter { $0.provider != provider })
            guard !taken.isEmpty else { continue }
            released[uid] = taken
            held[uid] = kept.isEmpty ? nil : kept
        }
        return released
    }

    /// Writes `uid`'s persistent sessions, the whole list (an empty one removes the file);
    /// nothing when the uid has neither sessions to save nor a file.
    mutating func save(_ list: [PersistedSession], uid: UInt32) {
        // Nothing to write: the store is not even opened (memory-only uids never touch the disk).
        guard let persistence, !list.isEmpty || filed.contains(uid) || held[uid] != nil else { return }
        guard let store = persistence.store() else {
            // SessionPersistence logged why.
            unsaved[uid] = "the session store cannot be opened (the daemon's log says why)"
            return
        }
        if !readAll { readUnread(store) }
        switch store.readIfUnread(uid: uid) {
        case nil: break
        case .success(let list)?:
            // Read only now: what it holds stays on disk, beside what is saved now.
            if !list.isEmpty {
                filed.insert(uid)
                held[uid, default: []] += list
                logger.notice(
                    "a sessions file unread at start was read: its sessions are kept on disk; restart authgated to use them",
                    metadata: ["peer.uid": "\(uid)", "sessions.kept": "\(list.count)"]
                )
            }
        case .failure(let problem)?:
            guard problem.keptUnread else {
                logger.error("saved sessions lost: \(problem)", metadata: ["peer.uid": "\(uid)"])
                break
            }
            unsaved[uid] = "\(problem.reason); it is not written over until it can be read"
            logger.error("cannot save sessions; they stay in memory: \(problem)", metadata: ["peer.uid": "\(uid)"])
            return
        }
        // A held session gives way for good to one of the same name signed in since: a logout
        // of that one must not bring the old one back.
        if let kept = held[uid] {
            let left = kept.filter { old in !list.contains { $0.provider == old.provider && $0.session == old.session } }
            held[uid] = left.isEmpty ? nil : left
        }
        let list = list + (held[uid] ?? [])
        guard !list.isEmpty || filed.contains(uid) else { return }
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

    /// The store opened only now (it could not at start, or no provider kept sessions on disk
    /// then): every file is read before the first is written, and what it holds is kept on
    /// disk, unused until a restart takes it back.
    private mutating func readUnread(_ store: SessionStore) {
        readAll = true
        let (sessions, problems) = store.loadAll()
        for problem in problems {
            logger.error(
                "\(problem.keptUnread ? "saved sessions out of reach for now" : "saved sessions lost"): \(problem)",
                metadata: problem.uid.map { ["peer.uid": "\($0)"] } ?? [:]
            )
        }
        for (uid, list) in sessions where !list.isEmpty {
            filed.insert(uid)
            held[uid, default: []] += list
        }
        if !sessions.isEmpty {
            logger.notice(
                "the session store opened after start: the sessions saved before are kept on disk; restart authgated to use them",
                metadata: ["sessions.kept": "\(sessions.values.reduce(0) { $0 + $1.count })"]
            )
        }
    }
}
