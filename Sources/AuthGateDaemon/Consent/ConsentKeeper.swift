import AuthGateCore
import AuthGateRPC
import AuthGateServer
import CLinux
import FoundationEssentials
import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Consent before a program gets a token: for the sessions of a provider with
/// `access.confirm`, and those whose user chose it at sign-in (`login --confirm`, kept in the
/// session's record), the first time a program asks for a token the user is asked
/// (``ConsentAsker``) and answers allow once, allow while this program runs, allow this program
/// from now on, or deny.
///
/// The program is the one a person recognizes behind the caller (``ConsentProgram``: the CLI's
/// parent, a script rather than its interpreter). Answers are kept per (uid, session, program):
/// `running` by the program's process (pid and start time) and executable, `always` by the
/// program's path and the SHA-256 of its content, remembered in `consent.json`. Questions never
/// hold up other callers: each waits in its own child process on a thread of its own
/// (``ChildProcess/runSuspending(input:timeout:)``); one session has one question at a time,
/// shared by the requests of one program; a uid has at most ``maximumQuestionsPerUser``; and a
/// question ends when the last caller waiting for it has gone. Every way to a token asks it
/// (``ConsentKeeper/require(_:_:for:)``), and a session that asks is never answered from the cached path
/// (``SessionBroadcast``, ``OpenProviders``).
final class ConsentKeeper: Sendable {
    /// "While it runs": one program's process, for one session.
    private struct RunningGrant: Hashable {
        var key: SessionKey
        var pid: Int32
        var startTime: UInt64
    }

    /// A question waiting for its answer: one per program and session; the requests waiting on
    /// it, so that it ends when the last of their callers has gone.
    private struct Question {
        var task: Task<ConsentReply, Never>
        var waiters: Set<UInt64>
    }

    private struct State {
        var records: ConsentRecords
        /// The sessions that ask because their user chose so at sign-in: a mirror of their
        /// records' ``SessionRecord/asksConsent``, kept by the session table
        /// (``sessionChoiceChanged(_:asks:)``), read on every publication of their tokens.
        var chosen: Set<SessionKey> = []
        /// Choices read from an older `consent.json` (which kept them), applied to the sessions
        /// restored at start-up (``takeEarlierChoices()``).
        var earlierChoices: Set<SessionKey>
        var running: [RunningGrant: (program: ConsentProgram, grantedAt: Date)] = [:]
        var questions: [RunningGrant: Question] = [:]
        var nextWaiter: UInt64 = 0
        var isShutDown = false
    }

    private let state: Mutex<State>
    /// Where `consent.json` lives; `nil`: nothing is remembered across restarts (tests).
    private let directory: String?
    private let asker: (any ConsentAsker)?
    private let timeout: Duration
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let tools: ToolFiles
    /// Finds the program behind a caller (``ConsentProgram/find(pid:uid:tools:)``; a test's
    /// slow one).
    private let findProgram: @Sendable (PeerCredentials, ToolFiles) -> ConsentProgram?
    /// One identification at a time per uid (``identify(_:)``).
    private let identifying = TurnsPerUser(maximumWaiting: ConsentKeeper.maximumIdentificationsWaiting)

    /// Requests of one uid that may wait while another of its programs is identified.
    static let maximumIdentificationsWaiting = 32

    /// The threads identifications run on: their own, not NIO's shared pool (one thread per
    /// core: one on a one-CPU host or container, where one user's slow hash would hold every
    /// other user's consent check, and a rekey, behind it). With a turn per uid, it takes as
    /// many users hashing at once as there are threads to delay a fifth. Threads for the life of
    /// the process, as NIO's own singletons are.
    static let identificationThreads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        return pool
    }()

    /// Questions one uid may have waiting at once (each for another session: a session has one
    /// at a time), and questions in all.
    static let maximumQuestionsPerUser = 4
    static let maximumQuestions = 64

    init(
        directory: String?,
        asker: (any ConsentAsker)?,
        timeout: Duration = .seconds(60),
        logger: Logger,
        tools: ToolFiles = .besideDaemon(),
        now: @escaping @Sendable () -> Date = { Date() },
        findProgram: @escaping @Sendable (PeerCredentials, ToolFiles) -> ConsentProgram? = {
            ConsentProgram.find(pid: $0.pid, uid: $0.uid, tools: $1)
        }
    ) {
        let records = directory.map { ConsentRecords.load(from: $0, logger: logger) } ?? ConsentRecords()
        let earlier = records.confirmSessions.compactMap { chosen -> SessionKey? in
            guard let provider = ProviderID(chosen.provider), let name = SessionName(chosen.session) else { return nil }
            return SessionKey(uid: chosen.uid, provider: provider, name: name)
        }
        state = Mutex(State(records: records, earlierChoices: Set(earlier)))
        self.directory = directory
        self.asker = asker
        self.timeout = timeout
        self.logger = logger
        self.tools = tools
        self.now = now
        self.findProgram = findProgram
    }

    /// Whether a program must be allowed before it gets `key`'s tokens.
    func requiresConsent(_ key: SessionKey, _ configuration: ProviderConfiguration) -> Bool {
        configuration.access.confirm || sessionAsks(key)
    }

    /// Whether `key`'s user chose consent at sign-in: read on every publication of its tokens.
    func sessionAsks(_ key: SessionKey) -> Bool {
        state.withLock { $0.chosen.contains(key) }
    }

    /// The session's record now asks (or no longer asks, or is gone): told by the session table
    /// in the same step as the change, before any of its tokens is published.
    func sessionChoiceChanged(_ key: SessionKey, asks: Bool) {
        state.withLock { current in
            if asks { current.chosen.insert(key) } else { current.chosen.remove(key) }
        }
    }

    /// The choices an older `consent.json` kept, once: the daemon applies them to the sessions it
    /// restored, and the file is written again without them.
    func takeEarlierChoices() -> Set<SessionKey> {
        update { current in
            guard !current.earlierChoices.isEmpty else { return false }
            current.records.confirmSessions = []
            return true
        } taking: { current in
            defer { current.earlierChoices = [] }
            return current.earlierChoices
        }
    }

    /// The program behind the caller, found on a thread of ``identificationThreads``: the walk
    /// reads /proc and may hash a large executable or script (up to
    /// ``ConsentProgram/maximumHashedSize``; a user's own file named as a script), which must
    /// not hold one of the few threads every request's task shares. One at a time per uid: a
    /// user touching a large script before each request makes its own requests wait, not
    /// another user's.
    /// - Throws: `rate_limited` when too many of the uid's requests wait already.
    private func identify(_ caller: PeerCredentials) async throws(AuthGateError) -> ConsentProgram? {
        guard await identifying.take(caller.uid) else {
            throw AuthGateError(
                .rateLimited,
                "Too many of your programs are waiting to be identified for consent; try again shortly.",
                retryAfterSeconds: 1
            )
        }
        defer { identifying.give(caller.uid) }
        let (tools, findProgram) = (tools, findProgram)
        return try? await Self.identificationThreads.runIfActive { findProgram(caller, tools) }
    }

    /// Allows the caller to have `key`'s tokens, asking the user when no answer covers it.
    /// - Parameter callerGone: Registers what to do when the caller's connection closes (its
    ///   question ends when no caller waits for it any more); `nil` in process.
    /// - Throws: `consent_denied` when the user denies, does not answer in time, or cannot be
    ///   asked, or the caller cannot be identified; `rate_limited` when another program's
    ///   question about the session is waiting, or the uid has too many.
    func check(
        _ caller: PeerCredentials,
        _ key: SessionKey,
        providerName: String,
        callerGone: ((@escaping @Sendable () -> Void) -> Void)? = nil
    ) async throws(AuthGateError) {
        let which = key.name == .default ? "" : " (session \(key.name.rawValue))"
        // The process now, which must be the one pinned when it connected, where it was pinned.
        guard let process = ProcessIdentity(pid: caller.pid), caller.process == nil || caller.process == process,
            let program = try await identify(caller)
        else {
            throw AuthGateError(.consentDenied, Self.unidentified(caller, providerName: providerName, which: which))
        }
        let grant = RunningGrant(key: key, pid: program.pid, startTime: program.startTime)
        let allowed = state.withLock { current in
            current.running[grant]?.program.isSameRun(as: program) == true
                || current.records.allowed.contains { $0.covers(key, program) }
        }
        if allowed { return }
        let denied = { (why: String) in
            AuthGateError(.consentDenied, "\(program.name) (pid \(program.pid)) may not have a token of your \(providerName) sign-in\(which): \(why).")
        }
        guard let asker else {
            throw denied("it asks first, and authgated has no way to ask you (set AUTHGATE_ASKPASS in its environment, or run it with a desktop session)")
        }
        let question = ConsentQuestion(
            provider: key.provider,
            providerName: providerName,
            session: key.name,
            uid: caller.uid,
            pid: program.pid,
            executable: program.name,
            commandLine: program.commandLine,
            through: program.through,
            canAllowAlways: program.digest != nil
        )
        let timeout = timeout
        let joined = state.withLock { current -> Result<(Task<ConsentReply, Never>, UInt64), AuthGateError> in
            guard !current.isShutDown else { return .failure(AuthGateError(.serviceUnavailable, "authgated is stopping.")) }
            current.nextWaiter += 1
            let waiter = current.nextWaiter
            if var pending = current.questions[grant] {
                pending.waiters.insert(waiter)
                current.questions[grant] = pending
                return .success((pending.task, waiter))
            }
            if current.questions.keys.contains(where: { $0.key == key }) {
                return .failure(
                    AuthGateError(
                        .rateLimited,
                        "Another program's question about your \(providerName) sign-in\(which) is waiting for your answer; answer it, then try again.",
                        retryAfterSeconds: 5
                    )
                )
            }
            if current.questions.keys.count(where: { $0.key.uid == key.uid }) >= Self.maximumQuestionsPerUser
                || current.questions.count >= Self.maximumQuestions
            {
                return .failure(
                    AuthGateError(.rateLimited, "Too many questions are waiting for your answer; answer them, then try again.", retryAfterSeconds: 5)
                )
            }
            let task = Task { await asker.ask(question, timeout: timeout) }
            current.questions[grant] = Question(task: task, waiters: [waiter])
            return .success((task, waiter))
        }
        let (asking, waiter) = try joined.get()
        callerGone? { [weak self] in self?.leave(grant, waiter: waiter, task: asking) }
        let reply = await asking.value
        leave(grant, waiter: waiter, task: asking, cancelling: false)
        var metadata = key.logMetadata([
            "peer.pid": "\(caller.pid)", "consent.program": "\(program.name)", "consent.pid": "\(program.pid)",
        ])
        switch reply {
        case .answered(let answer):
            metadata["consent.answer"] = "\(answer.rawValue)"
            logger.notice(answer == .deny ? "consent denied" : "consent given", metadata: metadata)
            switch answer {
            case .once:
                return
            case .always where program.digest != nil:
                remember(key, program)
            case .running, .always:
                // A program with no file of its own (an interactive shell) is allowed while it runs.
                state.withLock { $0.running[grant] = (program, now()) }
            case .deny:
                throw denied("you denied it")
            }
        case .timedOut:
            logger.notice("consent not answered in time; denied", metadata: metadata)
            throw denied("you did not answer within \(timeout.components.seconds) s")
        case .failed(let why):
            logger.warning("consent could not be asked; denied: \(why)", metadata: metadata)
            throw denied("the question could not be asked (\(why))")
        }
    }

    /// One request stopped waiting for `grant`'s question; the question ends (its program is
    /// killed) when none waits any more, so a caller that hung up does not hold it.
    private func leave(_ grant: RunningGrant, waiter: UInt64, task: Task<ConsentReply, Never>, cancelling: Bool = true) {
        let orphaned = state.withLock { current -> Bool in
            guard var pending = current.questions[grant], pending.task == task, pending.waiters.remove(waiter) != nil else { return false }
            if pending.waiters.isEmpty {
                current.questions[grant] = nil
                return cancelling
            }
            current.questions[grant] = pending
            return false
        }
        if orphaned { task.cancel() }
    }

    /// Why the caller could not be identified: gone or another program, or hidden from the daemon.
    private static func unidentified(_ caller: PeerCredentials, providerName: String, which: String) -> String {
        let prefix = "Your \(providerName) sign-in\(which) asks before a program gets its token, and the program (pid \(caller.pid)) could not be identified"
        // kill(pid, 0) sees a process that /proc hides (ProtectProc=invisible, hidepid=): EPERM
        // or success means it runs.
        if access("/proc/\(caller.pid)", F_OK) != 0, kill(caller.pid, 0) == 0 || errno == EPERM {
            return
                "\(prefix): authgated cannot see other users' processes (it runs as uid \(geteuid()) with /proc hidden, as the system unit's ProtectProc=invisible does), so it cannot ask about them; consent for other users' sessions needs their own per-user daemon (docs/SECURITY.md, Consent)."
        }
        return "\(prefix): it has exited, or runs another program than when it connected."
    }

    /// The caller's chosen sessions and remembered answers, processes that are gone left out.
    func list(uid: UInt32) -> ConsentListResult {
        state.withLock { current in
            current.running = current.running.filter { grant, _ in ProcessIdentity(pid: grant.pid)?.startTime == grant.startTime }
            let sessions = current.chosen.filter { $0.uid == uid }.sorted().map {
                ConsentSession(provider: $0.provider.rawValue, session: $0.name.rawValue)
            }
            let always = current.records.allowed.filter { $0.uid == uid }.map {
                ConsentEntry(
                    provider: $0.provider,
                    session: $0.session,
                    answer: ConsentAnswer.always.rawValue,
                    executable: $0.executable,
                    grantedAt: Date(timeIntervalSince1970: TimeInterval($0.grantedAt))
                )
            }
            let running = current.running.filter { $0.key.key.uid == uid }.map { grant, granted in
                ConsentEntry(
                    provider: grant.key.provider.rawValue,
                    session: grant.key.name.rawValue,
                    answer: ConsentAnswer.running.rawValue,
                    executable: granted.program.path,
                    pid: grant.pid,
                    grantedAt: granted.grantedAt
                )
            }
            let answers = (always + running).sorted { ($0.provider, $0.session, $0.executable) < ($1.provider, $1.session, $1.executable) }
            return ConsentListResult(sessions: sessions, answers: answers)
        }
    }

    /// Forgets the caller's answers that match every criterion given; the programs are asked
    /// again next time.
    /// - Returns: How many were forgotten.
    func revoke(uid: UInt32, provider: String?, session: String?, executable: String?) -> Int {
        var revoked = 0
        update { current in
            let before = current.records.allowed.count + current.running.count
            current.records.allowed.removeAll {
                $0.uid == uid && (provider ?? $0.provider) == $0.provider && (session ?? $0.session) == $0.session
                    && (executable ?? $0.executable) == $0.executable
            }
            current.running = current.running.filter { grant, granted in
                !(grant.key.uid == uid && (provider ?? grant.key.provider.rawValue) == grant.key.provider.rawValue
                    && (session ?? grant.key.name.rawValue) == grant.key.name.rawValue
                    && (executable ?? granted.program.path) == granted.program.path)
            }
            revoked = before - current.records.allowed.count - current.running.count
            return revoked > 0
        }
        return revoked
    }

    /// How many requests wait for the answers to `uid`'s questions (a test waits for them all
    /// to be there before it answers).
    func callersWaiting(uid: UInt32) -> Int {
        state.withLock { current in current.questions.filter { $0.key.key.uid == uid }.reduce(0) { $0 + $1.value.waiters.count } }
    }

    /// Stops every question still waiting (their programs are killed; their callers denied).
    func shutdown() async {
        let pending = state.withLock { current in
            current.isShutDown = true
            return current.questions.values.map(\.task)
        }
        for task in pending { task.cancel() }
        for task in pending { _ = await task.value }
    }

    /// An "always" answer, for the program's file as it is now (path and content).
    private func remember(_ key: SessionKey, _ program: ConsentProgram) {
        guard let digest = program.digest else { return }
        let granted = Int64(now().timeIntervalSince1970)
        update { current in
            current.records.allowed.removeAll {
                $0.uid == key.uid && $0.provider == key.provider.rawValue && $0.session == key.name.rawValue && $0.executable == program.path
            }
            current.records.allowed.append(
                ConsentRecords.Allowed(
                    uid: key.uid,
                    provider: key.provider.rawValue,
                    session: key.name.rawValue,
                    executable: program.path,
                    interpreter: program.interpreter,
                    digest: digest,
                    grantedAt: granted
                )
            )
            current.records.keepWithinLimits(newest: key.uid)
            return true
        }
    }

    /// Changes the state; when `change` says it changed what is remembered, saves the file (in
    /// the lock: changes come from a person's answers, and the file must not be written out of
    /// order).
    @discardableResult
    private func update<Taken>(_ change: (inout State) -> Bool, taking: (inout State) -> Taken = { _ in () }) -> Taken {
        state.withLock { current in
            if change(&current), let directory, let problem = current.records.save(to: directory) {
                logger.error("consent answers could not be saved; they hold until authgated stops", metadata: ["error": "\(problem)"])
            }
            return taking(&current)
        }
    }

    /// `/proc/PID/exe`'s target, or `?`.
    static func executablePath(_ pid: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 4097)
        let length = readlink("/proc/\(pid)/exe", &buffer, 4096)
        guard length > 0 else { return "?" }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self).escapingControlCharacters
    }

    /// `/proc/PID/cmdline`, arguments joined by spaces, escaped and cut.
    static func commandLine(_ pid: Int32) -> String {
        let fd = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "?" }
        defer { close(fd) }
        guard let bytes = StorageFiles.readAll(fd, limit: 64 * 1024) else { return "?" }
        let arguments = bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        var text = arguments.joined(separator: " ").trimming(while: \.isWhitespace).escapingControlCharacters
        if text.utf8.count > ConsentQuestion.commandLineLimit {
            text = String(decoding: text.utf8.prefix(ConsentQuestion.commandLineLimit), as: UTF8.self) + "…"
        }
        return text
    }
}
