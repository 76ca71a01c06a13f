import AuthGateCore
import AuthGateRPC
import AuthGateServer
import CLinux
import FoundationEssentials
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Consent before a program gets a token: for the sessions of a provider with
/// `access.confirm`, and those whose user chose it at sign-in (`login --confirm`), the first
/// time a program asks for a token the user is asked (``ConsentAsker``) and answers allow once,
/// allow while this program runs, allow this executable from now on, or deny.
///
/// Answers are kept per (uid, session, program): `running` by the process (pid and start time,
/// so a reused pid is another process), `always` by the executable file (device and inode, as
/// `access.executables` identifies it; a program replaced by an upgrade is asked about again),
/// remembered in `consent.json`. Questions never hold up other callers: each waits in its own
/// child process (``ChildProcess/runSuspending(input:timeout:)``), and concurrent requests of one
/// process for one session share one question. Every way to a token asks it (``MethodHandlers``),
/// and a session that asks is never answered from the cached path (``SessionBroadcast``,
/// ``OpenProviders``).
final class ConsentKeeper: Sendable {
    private struct ProcessGrant: Hashable {
        var uid: UInt32
        var pid: Int32
        var startTime: UInt64
        var key: SessionKey
    }

    private struct State {
        var records: ConsentRecords
        var chosen: Set<SessionKey>
        var running: [ProcessGrant: (executable: String, grantedAt: Date)] = [:]
        var questions: [ProcessGrant: Task<ConsentReply, Never>] = [:]
        var isShutDown = false
    }

    private let state: Mutex<State>
    /// Where `consent.json` lives; `nil`: nothing is remembered across restarts (tests).
    private let directory: String?
    private let asker: (any ConsentAsker)?
    private let timeout: Duration
    private let logger: Logger
    private let now: @Sendable () -> Date

    init(
        directory: String?,
        asker: (any ConsentAsker)?,
        timeout: Duration = .seconds(60),
        logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        let records = directory.map { ConsentRecords.load(from: $0, logger: logger) } ?? ConsentRecords()
        let chosen = records.confirmSessions.compactMap { chosen -> SessionKey? in
            guard let provider = ProviderID(chosen.provider), let name = SessionName(chosen.session) else { return nil }
            return SessionKey(uid: chosen.uid, provider: provider, name: name)
        }
        state = Mutex(State(records: records, chosen: Set(chosen)))
        self.directory = directory
        self.asker = asker
        self.timeout = timeout
        self.logger = logger
        self.now = now
    }

    /// Whether a program must be allowed before it gets `key`'s tokens.
    func requiresConsent(_ key: SessionKey, _ configuration: ProviderConfiguration) -> Bool {
        configuration.access.confirm || sessionAsks(key)
    }

    /// Whether `key`'s user chose consent at sign-in: read on every publication of its tokens.
    func sessionAsks(_ key: SessionKey) -> Bool {
        state.withLock { $0.chosen.contains(key) }
    }

    /// The user's choice at sign-in (`login --confirm`, `--no-confirm`), kept for the session's
    /// name until the session is signed out.
    func choose(_ key: SessionKey, confirm: Bool) {
        update { current in
            guard confirm ? current.chosen.insert(key).inserted : current.chosen.remove(key) != nil else { return false }
            current.records.confirmSessions = current.chosen.sorted().map {
                ConsentRecords.ChosenSession(uid: $0.uid, provider: $0.provider.rawValue, session: $0.name.rawValue)
            }
            return true
        }
    }

    /// Allows the caller to have `key`'s tokens, asking the user when no answer covers it.
    /// - Throws: `consent_denied` when the user denies, does not answer in time, or cannot be
    ///   asked, or the caller cannot be identified.
    func check(_ caller: PeerCredentials, _ key: SessionKey, providerName: String) async throws(AuthGateError) {
        let which = key.name == .default ? "" : " (session \(key.name.rawValue))"
        // The process now, which must be the one pinned when it connected, where it was pinned.
        guard let process = ProcessIdentity(pid: caller.pid), caller.process == nil || caller.process == process else {
            throw AuthGateError(
                .consentDenied,
                "Your \(providerName) sign-in\(which) asks before a program gets its token, and the program (pid \(caller.pid)) could not be identified: it has exited, or runs another program than when it connected."
            )
        }
        let grant = ProcessGrant(uid: caller.uid, pid: caller.pid, startTime: process.startTime, key: key)
        let allowed = state.withLock { current in
            current.running[grant] != nil
                || current.records.allowed.contains {
                    $0.uid == key.uid && $0.provider == key.provider.rawValue && $0.session == key.name.rawValue
                        && $0.device == process.executableDevice && $0.inode == process.executableInode
                }
        }
        if allowed { return }
        let executable = Self.executablePath(caller.pid)
        let denied = { (why: String) in
            AuthGateError(.consentDenied, "\(executable) (pid \(caller.pid)) may not have a token of your \(providerName) sign-in\(which): \(why).")
        }
        guard let asker else {
            throw denied("it asks first, and authgated has no way to ask you (set AUTHGATE_ASKPASS in its environment, or run it with a desktop session)")
        }
        let question = ConsentQuestion(
            provider: key.provider,
            providerName: providerName,
            session: key.name,
            uid: caller.uid,
            pid: caller.pid,
            executable: executable,
            commandLine: Self.commandLine(caller.pid)
        )
        let timeout = timeout
        let asking = state.withLock { current -> Task<ConsentReply, Never>? in
            guard !current.isShutDown else { return nil }
            if let pending = current.questions[grant] { return pending }
            let task = Task { await asker.ask(question, timeout: timeout) }
            current.questions[grant] = task
            return task
        }
        guard let asking else { throw AuthGateError(.serviceUnavailable, "authgated is stopping.") }
        let reply = await asking.value
        state.withLock { current in
            if current.questions[grant] == asking { current.questions[grant] = nil }
        }
        var metadata = key.logMetadata(["peer.pid": "\(caller.pid)", "consent.executable": "\(executable)"])
        switch reply {
        case .answered(let answer):
            metadata["consent.answer"] = "\(answer.rawValue)"
            logger.notice(answer == .deny ? "consent denied" : "consent given", metadata: metadata)
            switch answer {
            case .once:
                return
            case .running:
                state.withLock { $0.running[grant] = (executable, now()) }
            case .always:
                remember(key, executable: executable, process: process)
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
            let running = current.running.filter { $0.key.uid == uid }.map { grant, granted in
                ConsentEntry(
                    provider: grant.key.provider.rawValue,
                    session: grant.key.name.rawValue,
                    answer: ConsentAnswer.running.rawValue,
                    executable: granted.executable,
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
                !(grant.uid == uid && (provider ?? grant.key.provider.rawValue) == grant.key.provider.rawValue
                    && (session ?? grant.key.name.rawValue) == grant.key.name.rawValue && (executable ?? granted.executable) == granted.executable)
            }
            revoked = before - current.records.allowed.count - current.running.count
            return revoked > 0
        }
        return revoked
    }

    /// The session was signed out: the user's choice at its sign-in ends with it.
    func sessionSignedOut(_ key: SessionKey) {
        guard sessionAsks(key) else { return }
        choose(key, confirm: false)
    }

    /// Stops every question still waiting (their programs are killed; their callers denied).
    func shutdown() async {
        let pending = state.withLock { current in
            current.isShutDown = true
            return Array(current.questions.values)
        }
        for task in pending { task.cancel() }
        for task in pending { _ = await task.value }
    }

    private func remember(_ key: SessionKey, executable: String, process: ProcessIdentity) {
        let granted = Int64(now().timeIntervalSince1970)
        update { current in
            current.records.allowed.removeAll {
                $0.uid == key.uid && $0.provider == key.provider.rawValue && $0.session == key.name.rawValue && $0.device == process.executableDevice
                    && $0.inode == process.executableInode
            }
            current.records.allowed.append(
                ConsentRecords.Allowed(
                    uid: key.uid,
                    provider: key.provider.rawValue,
                    session: key.name.rawValue,
                    executable: executable,
                    device: process.executableDevice,
                    inode: process.executableInode,
                    grantedAt: granted
                )
            )
            current.records.allowed = Array(current.records.allowed.suffix(ConsentRecords.limit))
            return true
        }
    }

    /// Changes the state; when `change` says it changed what is remembered, saves the file (in
    /// the lock: changes are rare, and the file must not be written out of order).
    private func update(_ change: (inout State) -> Bool) {
        state.withLock { current in
            guard change(&current), let directory else { return }
            if let problem = current.records.save(to: directory) {
                logger.error("consent answers could not be saved; they hold until authgated stops", metadata: ["error": "\(problem)"])
            }
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
