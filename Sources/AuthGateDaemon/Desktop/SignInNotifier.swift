import AuthGateCore
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Starts a session's interactive sign-in from the daemon's side, for the "Sign in" action of
/// a notification (``DesktopSignIn``).
protocol InteractiveSignInStarter: Sendable {
    /// Whether the session's provider can sign in in a browser (the authorization-code grant):
    /// only then does the notification offer the action.
    func canStart(_ key: SessionKey) async -> Bool
    /// Starts the browser sign-in and opens its page; the flow restores the session when the
    /// user finishes it.
    func start(_ key: SessionKey) async
}

/// `authgated --notify`: one desktop notification when a session of the daemon's user needs a
/// new sign-in — the provider refused or lost its refresh token, or an administrator narrowed
/// the provider's access — with the command that signs in again and, where the provider signs
/// in in a browser, a "Sign in" action that starts that sign-in from here.
///
/// The notification goes through `notify-send` (libnotify-bin: `org.freedesktop.Notifications`
/// on the session bus), run as a child this notifier owns: with an action it waits, until the
/// user picks it or dismisses the notification, printing the action's name. At most one per
/// session until the session has tokens again; none for a session the user signed out; none for
/// another uid's session (the desktop is the daemon's user's); nothing when the daemon has no
/// session bus. Only the provider's id, the session's name and the session's ending sentence are
/// shown: never a token.
final class SignInNotifier: Sendable {
    private struct Shown {
        var key: SessionKey
        var task: Task<Void, Never>
        /// The user picked its Sign in action: the task is starting that sign-in now, which a
        /// restored session must not stop (the sign-in is what restores it).
        var picked = false
    }

    private struct State {
        /// Sessions told about since they last had tokens.
        var notified: Set<SessionKey> = []
        /// Each notification's task, by its id, until it ends.
        var showing: [UInt64: Shown] = [:]
        var nextID: UInt64 = 0
        var starter: (any InteractiveSignInStarter)?
        var isShutDown = false
        var toldOfLostSessions = false
        /// The notification of ``savedSessionsLost(uid:because:)``, while it is handed over.
        var lost: Task<Void, Never>?
    }

    private let state = Mutex(State())
    /// `notify-send`'s path.
    private let program: String
    /// The desktop session it notifies on; its Sign in action opens pages there too.
    let desktop: DesktopSession
    /// Whose sessions are told about: the daemon's own user.
    private let owner: UInt32
    private let logger: Logger

    /// How long a notification with an action is waited on before its `notify-send` is stopped
    /// (the notification itself stays where the server keeps it).
    static let actionWait: Duration = .seconds(12 * 3600)
    /// How long `notify-send` may take to hand over a notification without an action.
    static let deliveryWait: Duration = .seconds(10)

    init(program: String, desktop: DesktopSession, owner: UInt32 = UInt32(geteuid()), logger: Logger) {
        self.program = program
        self.desktop = desktop
        self.owner = owner
        self.logger = logger
    }

    /// The notifier of the desktop session `environment` names; `nil`, saying why in the log,
    /// when there is no session bus (quietly: a system daemon, an SSH login) or no
    /// `notify-send` (`AUTHGATE_NOTIFY_SEND` names another program that takes its arguments).
    static func find(environment: [String: String], logger: Logger) -> SignInNotifier? {
        guard case .success(let desktop) = DesktopSession.find(environment: environment) else {
            logger.debug("--notify: no session bus, so no notifications")
            return nil
        }
        let explicit = environment["AUTHGATE_NOTIFY_SEND"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        guard let program = explicit ?? desktop.program("notify-send") else {
            logger.warning("--notify: notify-send is not installed (Debian: apt install libnotify-bin); no notifications")
            return nil
        }
        return SignInNotifier(program: program, desktop: desktop, logger: logger)
    }

    /// Who starts a sign-in when the user picks the action; set once the daemon's services exist.
    func setStarter(_ starter: any InteractiveSignInStarter) {
        state.withLock { $0.starter = starter }
    }

    /// `key`'s session needs a new sign-in: why, in one sentence (the session's ending message).
    func sessionNeedsSignIn(_ key: SessionKey, because message: String, offerSignIn: Bool) {
        guard key.uid == owner else { return }
        state.withLock { current in
            guard !current.isShutDown, current.notified.insert(key).inserted else { return }
            let id = current.nextID
            current.nextID += 1
            let starter = offerSignIn ? current.starter : nil
            current.showing[id] = Shown(
                key: key,
                task: Task { [self] in
                    await show(key, id: id, message: message, starter: starter)
                    _ = state.withLock { $0.showing.removeValue(forKey: id) }
                }
            )
        }
    }

    /// The daemon's user's saved sessions could not be opened at start-up (the storage key is
    /// gone or another, the file is damaged): every one of them needs a new sign-in, and which
    /// they were is sealed in the file, so one notification says so.
    func savedSessionsLost(uid: UInt32, because reason: String) {
        guard uid == owner else { return }
        state.withLock { current in
            guard !current.isShutDown, !current.toldOfLostSessions else { return }
            current.toldOfLostSessions = true
            let text = (
                summary: "Your saved sign-ins could not be opened",
                body: Self.markupEscaped(String(reason.prefix(400)).escapingControlCharacters)
                    + "\nSign in again: authgate login PROVIDER (authgate providers lists them)"
            )
            current.lost = Task { [self] in await deliver(text) }
        }
    }

    /// `key`'s session has tokens again (or is gone): a later ending is told again, and a
    /// notification still waiting for its action is withdrawn (its `notify-send` stopped). A
    /// sign-in its action started goes on: it may well be what restored the session, and its
    /// page's opener is still finishing.
    func sessionRestored(_ key: SessionKey) {
        guard key.uid == owner else { return }
        let waiting = state.withLock { state -> [Task<Void, Never>] in
            guard state.notified.remove(key) != nil else { return [] }
            let ids = state.showing.filter { $0.value.key == key && !$0.value.picked }.map(\.key)
            return ids.compactMap { state.showing.removeValue(forKey: $0)?.task }
        }
        for task in waiting { task.cancel() }
    }

    /// Stops every `notify-send` still waiting, and waits until they are gone.
    func shutdown() async {
        let tasks = state.withLock { state in
            state.isShutDown = true
            defer { state.showing = [:] }
            return state.showing.values.map(\.task) + (state.lost.map { [$0] } ?? [])
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    /// A notification without an action.
    private func deliver(_ text: (summary: String, body: String)) async {
        let arguments = ["--app-name=authgate", "--icon=dialog-password", "--urgency=normal", "--", text.summary, text.body]
        let child = ChildProcess(path: program, arguments: arguments, environment: desktop.environmentLines)
        switch await child.runSuspending(input: [], timeout: Self.deliveryWait) {
        case .exited(0, _, _): logger.info("saved sessions lost: notified")
        case .exited(let status, _, let errorText): logger.warning("saved sessions lost: notify-send failed (exit status \(status)): \(errorText.prefix(300))")
        case .notStarted(let reason): logger.warning("saved sessions lost: notify-send could not be started: \(reason)")
        case .timedOut: logger.warning("saved sessions lost: notify-send did not finish in time; it was stopped")
        case .cancelled: break
        }
    }

    private func show(_ key: SessionKey, id: UInt64, message: String, starter: (any InteractiveSignInStarter)?) async {
        let offers = await starter?.canStart(key) ?? false
        guard !Task.isCancelled else { return }
        let text = Self.text(key, message: message)
        var arguments = ["--app-name=authgate", "--icon=dialog-password", "--urgency=normal"]
        if offers { arguments.append("--action=signin=Sign in") }
        arguments += ["--", text.summary, text.body]
        let child = ChildProcess(path: program, arguments: arguments, environment: desktop.environmentLines)
        let outcome = await child.runSuspending(input: [], timeout: offers ? Self.actionWait : Self.deliveryWait)
        let metadata = key.logMetadata()
        switch outcome {
        case .exited(0, let output, _):
            logger.info("sign-in needed: notified", metadata: metadata)
            let action = String(decoding: output, as: UTF8.self).trimming(while: \.isWhitespace)
            if offers, action == "signin", let starter {
                let stillShown = state.withLock { current -> Bool in
                    current.showing[id]?.picked = true
                    return current.showing[id] != nil
                }
                guard stillShown, !Task.isCancelled else { return }
                logger.notice("sign-in needed: the notification's Sign in action was picked; starting the sign-in", metadata: metadata)
                await starter.start(key)
            }
        case .exited(let status, _, let errorText):
            logger.warning(
                "sign-in needed: notify-send failed (exit status \(status))\(errorText.isEmpty ? "" : ": " + String(errorText.prefix(300)))",
                metadata: metadata
            )
        case .notStarted(let reason):
            logger.warning("sign-in needed: notify-send could not be started: \(reason)", metadata: metadata)
        case .timedOut:
            logger.warning("sign-in needed: notify-send did not finish in time; it was stopped", metadata: metadata)
        case .cancelled:
            break
        }
    }

    /// The notification's summary and body: the provider, the session, why (escaped: servers
    /// may read the body as markup) and the command that signs in again.
    static func text(_ key: SessionKey, message: String) -> (summary: String, body: String) {
        let session = key.name == .default ? "" : " --session \(key.name.rawValue)"
        let which = key.name == .default ? "" : " (session \(key.name.rawValue))"
        let why = String(message.prefix(400)).escapingControlCharacters
        return (
            "Sign in to \(key.provider) again\(which)",
            markupEscaped(why) + "\nRun: authgate login \(key.provider)\(session)"
        )
    }

    static func markupEscaped(_ text: String) -> String {
        text.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
    }
}
