import AuthGateCore
import CLinux
import Crypto
import FoundationEssentials
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

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
    /// The thread saves run on while event loops serve connections: the session manager runs
    /// every call on it, whatever task calls it (``SessionManager``'s executor).
    ///
    /// Without it, a call from an RPC request task would run the actor's work on the event loop
    /// that read the request (the task's executor preference, ``EventLoopTaskExecutor``; under
    /// SE-0417 a default actor runs on it), and a persistent session's save — a sealed file and
    /// two `fsync`s, or the keyring's child process the first time — would stall every
    /// connection on that loop. Here that work waits on this thread only. A thread for the life
    /// of the process, as NIO's own singletons are.
    static let thread: any EventLoop = {
        let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1).next()
        loop.execute { ag_set_thread_name("authgate-sessions") }
        return loop
    }()

    /// `sessions/` under the state directory.
    let directory: String
    /// Guards every file operation, the keys they use, and the files left unread.
    private let lock: Mutex<Keys>
    /// How a sessions file is opened for reading (`open(2)`, never following a link); a test
    /// gives one that fails as a busy or failing disk does.
    private let openForReading: @Sendable (String) -> Int32

    /// The key that seals, and those that may still open files sealed before a key change
    /// (``reseal(with:)``) finished: tried in turn when the sealing key does not open a file.
    struct Keys {
        var sealing: StorageKey
        var opening: [StorageKey] = []
        /// The uids whose file `loadAll` could not read (no descriptor left, a disk error):
        /// the file is left as it is, and none of them is written over before it is read
        /// (``readIfUnread(uid:)``).
        var unread: Set<UInt32> = []
    }

    static let fileSuffix = ".sessions"
    static let unreadableSuffix = ".sessions.unreadable"
    static let temporaryMarker = ".sessions.tmp-"

    /// - Parameter openingKeys: Keys that may have sealed some files (an interrupted `rekey`,
    ///   a key being retired); they open files but never seal one.
    init(
        stateDirectory: String,
        key: StorageKey,
        openingKeys: [StorageKey] = [],
        openForReading: @escaping @Sendable (String) -> Int32 = { StorageFiles.openFile($0, noFollow: true) }
    ) {
        directory = stateDirectory + "/sessions"
        lock = Mutex(Keys(sealing: key, opening: openingKeys.filter { $0 != key }))
        self.openForReading = openForReading
    }

    /// The file that holds `uid`'s sessions.
    func path(uid: UInt32) -> String {
        "\(directory)/\(uid)\(Self.fileSuffix)"
    }

    /// Replaces `uid`'s stored sessions with `sessions`; an empty list removes the file.
    /// - Throws: When the directory is unsafe or the file cannot be written; the previous
    ///   file is then left as it was.
    func save(_ sessions: [PersistedSession], uid: UInt32) throws(StorageError) {
        // Two fsyncs must never stall the connections of an event loop: saves run on the
        // session manager's thread, or off the loops altogether (start-up, rekey).
        assert(
            MultiThreadedEventLoopGroup.currentEventLoop == nil || Self.thread.inEventLoop,
            "a session store write on an event loop that serves connections"
        )
        try lock.withLock { keys throws(StorageError) in
            guard !keys.unread.contains(uid) else {
                throw StorageError(
                    file: path(uid: uid),
                    "\(path(uid: uid)) could not be read at start, so it is not written over until it has been read"
                )
            }
            let exists = try checkDirectory(create: !sessions.isEmpty)
            if sessions.isEmpty {
                guard exists else { return }
                try remove(uid: uid)
            } else {
                try write(try SealedSessionsFile.seal(sessions, uid: uid, key: keys.sealing, file: path(uid: uid)), uid: uid)
            }
        }
    }

    /// Removes `uid`'s stored sessions, if any.
    func delete(uid: UInt32) throws(StorageError) {
        try save([], uid: uid)
    }

    /// Reads every uid's sessions.
    ///
    /// Never throws: a file whose contents cannot be used (no key opens it, damaged, another
    /// format) is reported and moved aside (``moveAside(uid:)``), so the other uids load and
    /// the next save for that uid starts clean. A file that could not be read at all (no
    /// descriptor left, a disk error) is reported and left in place, and no save writes over it
    /// before ``readIfUnread(uid:)`` has read it. Temporary files left by a crash are removed.
    func loadAll() -> (sessions: [UInt32: [PersistedSession]], problems: [StoreProblem]) {
        lock.withLock { keys in
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
                switch readSessions(uid: uid, keys: keys) {
                case .success(let (list, _)):
                    sessions[uid] = list
                    keys.unread.remove(uid)
                case .failure(let failure) where failure.gone:
                    keys.unread.remove(uid)
                case .failure(let failure) where failure.notRead:
                    keys.unread.insert(uid)
                    problems.append(
                        StoreProblem(
                            uid: uid,
                            file: path(uid: uid),
                            reason: failure.reason + "; it is left as it is, and read again before it is written",
                            keptUnread: true
                        )
                    )
                case .failure(let failure):
                    keys.unread.remove(uid)
                    let problem = moveAside(uid: uid, failure)
                    removedAny = removedAny || problem.movedTo != nil
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

    /// Reads `uid`'s file if `loadAll` could not: its sessions (to be kept on disk beside the
    /// ones saved next), or `nil` when it was read at start (or there is none).
    /// - Returns: `.failure` when it still cannot be read (it stays unread: no save writes
    ///   over it) or what it holds cannot be used (then it is moved aside, and saves go on).
    func readIfUnread(uid: UInt32) -> Result<[PersistedSession], StoreProblem>? {
        lock.withLock { keys in
            guard keys.unread.contains(uid) else { return nil }
            switch readSessions(uid: uid, keys: keys) {
            case .success(let (list, _)):
                keys.unread.remove(uid)
                return .success(list)
            case .failure(let failure) where failure.gone:
                keys.unread.remove(uid)
                return .success([])
            case .failure(let failure) where failure.notRead:
                return .failure(StoreProblem(uid: uid, file: path(uid: uid), reason: failure.reason, keptUnread: true))
            case .failure(let failure):
                var problem = moveAside(uid: uid, failure)
                if problem.movedTo != nil {
                    keys.unread.remove(uid)
                    _ = StorageFiles.syncDirectory(directory)
                } else {
                    // Still in the way, and not to be written over: tried again at the next save.
                    problem.keptUnread = true
                }
                return .failure(problem)
            }
        }
    }

    /// How many files of one uid are kept aside: the first ones a person may still open (with
    /// a key from a backup), and the newest.
    static let filesKeptAside = 9

    /// Moves `uid`'s file whose contents cannot be used to `<uid>.sessions.unreadable`, or,
    /// when that is taken by an earlier one, `.unreadable.2` … `.unreadable.9` (the last
    /// replaced when all are taken), so that the next save starts clean and no earlier file
    /// moved aside is lost. Called with the lock held.
    private func moveAside(uid: UInt32, _ failure: StoreFailure) -> StoreProblem {
        let file = path(uid: uid)
        var problem = StoreProblem(uid: uid, file: file, reason: failure.reason)
        let first = directory + "/\(uid)" + Self.unreadableSuffix
        let names = [first] + (2...Self.filesKeptAside).map { first + ".\($0)" }
        let aside = names.first { StorageFiles.pathStatus($0) == nil && errno == ENOENT } ?? names[names.count - 1]
        if rename(file, aside) == 0 {
            problem.movedTo = aside
        } else {
            problem.reason += "; moving it to \(aside) failed: \(StorageFiles.errorText())"
        }
        return problem
    }

    /// The uid of a file named `<uid>.sessions` with the uid in canonical decimal; `nil` for
    /// any other name.
    static func uid(fileName: String) -> UInt32? {
        guard fileName.hasSuffix(fileSuffix) else { return nil }
        let digits = fileName.dropLast(fileSuffix.count)
        guard digits.allSatisfy(\.isASCII), let uid = UInt32(digits), String(uid) == digits else { return nil }
        return uid
    }

    /// What ``reseal(with:)`` did.
    struct ResealReport: Sendable {
        /// Files now sealed with the new key.
        var files = 0
        /// The sessions in them.
        var sessions = 0
        /// Files no key opens, left as they are (the next start moves them aside).
        var unreadable: [StoreProblem] = []
    }

    /// Makes `key` the sealing key and seals every uid's file with it, each replaced atomically.
    ///
    /// Files are opened with any key known (the previous sealing key joins the opening keys),
    /// so a reseal that a crash interrupts can run again from the start. Once every file is
    /// sealed with `key`, the other keys are forgotten; when a file cannot be read or written,
    /// they are kept (and `key` stays the sealing key), so every file still opens. A file no
    /// key opens is reported and left as it is: forgetting the keys loses nothing of it.
    /// - Throws: When a file cannot be read or written; the files written so far stay sealed
    ///   with `key`.
    @discardableResult
    func reseal(with key: StorageKey) throws(StorageError) -> ResealReport {
        try lock.withLock { keys throws(StorageError) in
            if keys.sealing != key {
                keys.opening = [keys.sealing] + keys.opening.filter { $0 != key }
                keys.sealing = key
            }
            var report = ResealReport()
            guard try checkDirectory(create: false) else {
                keys.opening = []
                return report
            }
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: directory)
            } catch {
                throw StorageError(file: directory, "cannot list the sessions directory \(directory)")
            }
            for uid in names.compactMap(Self.uid(fileName:)).sorted() {
                switch readSessions(uid: uid, keys: keys) {
                case .success(let (list, sealedWithCurrentKey)):
                    report.files += 1
                    report.sessions += list.count
                    if !sealedWithCurrentKey {
                        try write(try SealedSessionsFile.seal(list, uid: uid, key: key, file: path(uid: uid)), uid: uid)
                    }
                case .failure(let failure) where failure.gone:
                    continue
                case .failure(let failure) where failure.notRead:
                    // Sealed with which key is not known: forgetting one could lose it.
                    throw StorageError(file: path(uid: uid), failure.reason)
                case .failure(let failure):
                    report.unreadable.append(StoreProblem(uid: uid, file: path(uid: uid), reason: failure.reason))
                }
            }
            keys.opening = []
            return report
        }
    }

    /// Reads and decrypts one uid's file, with the sealing key or else any opening key.
    /// - Returns: The sessions and whether the sealing key opened them, or why the file cannot
    ///   be used (a sentence naming it).
    private func readSessions(uid: UInt32, keys: Keys) -> Result<([PersistedSession], Bool), StoreFailure> {
        let file = path(uid: uid)
        // O_NOFOLLOW: a symlink here is not something this daemon made.
        let fd = openForReading(file)
        guard fd >= 0 else {
            let code = errno
            // A link (ELOOP) is what the file is; anything else is whether it could be read.
            return .failure(StoreFailure("\(file) cannot be opened: \(StorageFiles.errorText(code))", notRead: code != ELOOP, gone: code == ENOENT))
        }
        defer { close(fd) }
        guard let info = StorageFiles.fileStatus(fd), info.isRegularFile else {
            return .failure(StoreFailure("\(file) is not a regular file"))
        }
        guard info.size <= SealedSessionsFile.maximumFileSize else {
            return .failure(StoreFailure("\(file) is \(info.size) bytes, more than the 16 MiB a sessions file may be"))
        }
        guard let bytes = StorageFiles.readAll(fd, limit: SealedSessionsFile.maximumFileSize) else {
            return .failure(StoreFailure("\(file) cannot be read: \(StorageFiles.errorText())", notRead: true))
        }
        guard bytes.count <= SealedSessionsFile.maximumFileSize else {
            return .failure(StoreFailure("\(file) is more than the 16 MiB a sessions file may be"))
        }
        let opened = SealedSessionsFile.open(bytes, uid: uid, key: keys.sealing, file: file)
        if case .success(let list) = opened { return .success((list, true)) }
        for key in keys.opening {
            if case .success(let list) = SealedSessionsFile.open(bytes, uid: uid, key: key, file: file) { return .success((list, false)) }
        }
        return opened.map { ($0, true) }
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
        try StorageFiles.requirePrivate(info, "the sessions directory \(directory)", file: directory, risk: "get in", mode: "0700")
        return true
    }

    /// Replaces `uid`'s file with `bytes` atomically: a temporary file in the same directory
    /// (so the rename cannot cross file systems), synced, then renamed over the old one.
    private func write(_ bytes: [UInt8], uid: UInt32) throws(StorageError) {
        let file = path(uid: uid)
        let temporary: String
        switch StorageFiles.writeTemporaryFile(bytes, prefix: "\(directory)/.\(uid)\(Self.temporaryMarker)") {
        case .success(let written): temporary = written
        case .failure(let problem): throw StorageError(file: file, "cannot save \(file): \(problem.text)")
        }
        guard rename(temporary, file) == 0 else {
            let problem = StorageFiles.errorText()
            unlink(temporary)
            throw StorageError(file: file, "cannot save \(file): \(problem)")
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
    /// The file could not be opened or read (no descriptor left, a disk error, no
    /// permission): nothing is known of what it holds, so it must not be written over.
    var notRead = false
    /// The file went between the directory's listing and its opening.
    var gone = false
    init(_ reason: String, notRead: Bool = false, gone: Bool = false) {
        self.reason = reason
        self.notRead = notRead
        self.gone = gone
    }
}
