import AuthGateCore
import FoundationEssentials

/// What the user is asked before a program gets a session's token for the first time.
struct ConsentQuestion: Sendable {
    var provider: ProviderID
    var providerName: String
    var session: SessionName
    var uid: UInt32
    var pid: Int32
    /// The program's path (`/proc/PID/exe`), or `?` when it cannot be read.
    var executable: String
    /// Its command line, arguments separated by spaces, control characters escaped, cut to
    /// ``commandLineLimit`` bytes.
    var commandLine: String

    static let commandLineLimit = 512

    /// The question in two lines: what askpass programs show.
    var text: String {
        let session = session == .default ? "" : " (session \(session.rawValue))"
        return "Allow \(executable) (pid \(pid), uid \(uid)) to use your \(providerName) sign-in\(session)?\n\(commandLine)"
    }

    /// What the question tells a program in its environment besides the text, one fact a
    /// variable, for an askpass program that shows them its own way.
    var environment: [String] {
        [
            "AUTHGATE_CONSENT_PROVIDER=\(provider.rawValue)", "AUTHGATE_CONSENT_SESSION=\(session.rawValue)",
            "AUTHGATE_CONSENT_UID=\(uid)", "AUTHGATE_CONSENT_PID=\(pid)", "AUTHGATE_CONSENT_EXECUTABLE=\(executable)",
            "AUTHGATE_CONSENT_COMMAND=\(commandLine)",
        ]
    }
}

/// The user's answer.
enum ConsentAnswer: String, Sendable, CaseIterable {
    /// This request only: the next one asks again.
    case once
    /// Every request of this process (pid and start time) while it runs.
    case running
    /// This executable (its file, by device and inode) from now on, remembered across restarts.
    case always
    case deny
}

/// How asking went.
enum ConsentReply: Sendable, Equatable {
    case answered(ConsentAnswer)
    /// Nobody answered within the daemon's `--consent-timeout`.
    case timedOut
    /// The question could not be shown: why, for the log and the caller's error.
    case failed(String)
}

/// Who asks the user: an askpass program, or a notification with actions.
protocol ConsentAsker: Sendable {
    /// What asks, for the log: `askpass /usr/bin/ssh-askpass`.
    var description: String { get }
    func ask(_ question: ConsentQuestion, timeout: Duration) async -> ConsentReply
}

/// An askpass program, the Unix way to ask the user something from a program without a
/// terminal (ssh-agent's `ssh-add -c` asks through `SSH_ASKPASS` the same way): the question
/// is its one argument, `SSH_ASKPASS_PROMPT=confirm` in its environment says it is a yes/no
/// question. Exit status 0 with nothing printed allows once (`ssh-askpass`'s yes); any other exit
/// status denies; a program that knows more prints one of `once`, `running`, `always`, `deny`.
struct AskpassProgram: ConsentAsker {
    let path: String
    /// The daemon's desktop environment (``DesktopSession``), `NAME=value`.
    let environment: [String]

    var description: String { "askpass \(path)" }

    func ask(_ question: ConsentQuestion, timeout: Duration) async -> ConsentReply {
        let child = ChildProcess(
            path: path,
            arguments: [question.text],
            environment: environment + ["SSH_ASKPASS_PROMPT=confirm"] + question.environment
        )
        switch await child.runSuspending(input: [], timeout: timeout) {
        case .exited(0, let output, _):
            let printed = String(decoding: output, as: UTF8.self).trimming(while: \.isWhitespace)
            if printed.isEmpty { return .answered(.once) }
            guard let answer = ConsentAnswer(rawValue: String(printed)) else {
                return .failed("\(path) printed something other than once, running, always or deny")
            }
            return .answered(answer)
        case .exited:
            return .answered(.deny)
        case .notStarted(let reason):
            return .failed("\(path) could not be started: \(reason)")
        case .timedOut:
            return .timedOut
        case .cancelled:
            return .failed("authgated is stopping")
        }
    }
}

/// The question as a desktop notification with one action per answer (`notify-send`), for a
/// desktop with no askpass program: the user's click is the answer; a notification dismissed
/// without one denies.
struct NotificationQuestion: ConsentAsker {
    /// `notify-send`'s path.
    let program: String
    let environment: [String]

    var description: String { "notification via \(program)" }

    static let labels: KeyValuePairs<ConsentAnswer, String> = [
        .once: "Allow once", .running: "Allow while it runs", .always: "Always allow", .deny: "Deny",
    ]

    func ask(_ question: ConsentQuestion, timeout: Duration) async -> ConsentReply {
        let lines = question.text.split(separator: "\n", maxSplits: 1)
        var arguments = ["--app-name=authgate", "--icon=dialog-password", "--urgency=critical"]
        arguments += Self.labels.map { "--action=\($0.key.rawValue)=\($0.value)" }
        arguments += ["--", String(lines.first ?? ""), SignInNotifier.markupEscaped(lines.dropFirst().joined())]
        switch await ChildProcess(path: program, arguments: arguments, environment: environment).runSuspending(input: [], timeout: timeout) {
        case .exited(0, let output, _):
            let picked = String(decoding: output, as: UTF8.self).trimming(while: \.isWhitespace)
            return .answered(ConsentAnswer(rawValue: String(picked)) ?? .deny)
        case .exited(let status, _, let errorText):
            return .failed("notify-send failed (exit status \(status)): \(errorText.prefix(200))")
        case .notStarted(let reason):
            return .failed("notify-send could not be started: \(reason)")
        case .timedOut:
            return .timedOut
        case .cancelled:
            return .failed("authgated is stopping")
        }
    }
}

extension ConsentKeeper {
    /// Who asks, from the daemon's environment: `AUTHGATE_ASKPASS`, else `SSH_ASKPASS`, else
    /// `ssh-askpass` on the `PATH`, else a notification with actions where there is a session
    /// bus and `notify-send`; `nil` when there is no way to ask (every question then denies).
    static func findAsker(environment: [String: String]) -> (any ConsentAsker)? {
        let desktop = try? DesktopSession.find(environment: environment).get()
        let lines = desktop?.environmentLines ?? DesktopSession.withoutDaemonVariables(environment)
        for variable in ["AUTHGATE_ASKPASS", "SSH_ASKPASS"] {
            if let path = environment[variable], path.hasPrefix("/") { return AskpassProgram(path: path, environment: lines) }
        }
        if let path = ChildProcess.find("ssh-askpass", in: environment["PATH"]) { return AskpassProgram(path: path, environment: lines) }
        let notifySend = environment["AUTHGATE_NOTIFY_SEND"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? desktop?.program("notify-send")
        if desktop != nil, let notifySend { return NotificationQuestion(program: notifySend, environment: lines) }
        return nil
    }
}
