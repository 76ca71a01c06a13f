import AuthGateCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// What the user is asked before a program gets a session's token for the first time.
struct ConsentQuestion: Sendable {
    var provider: ProviderID
    var providerName: String
    var session: SessionName
    var uid: UInt32
    /// The program's process (``ConsentProgram``): the caller, or what ran authgate's CLI.
    var pid: Int32
    /// The program a person recognizes: its executable's path, or its script's with the
    /// interpreter (``ConsentProgram/name``).
    var executable: String
    /// Its command line, arguments separated by spaces, control characters escaped, cut to
    /// ``commandLineLimit`` bytes.
    var commandLine: String
    /// The command line of what connected, when it is not the program (authgate's CLI, `sh -c`).
    var through: String?
    /// Whether "always" can be answered: the program has a file of its own (not an interactive
    /// shell); otherwise "always" holds while it runs.
    var canAllowAlways: Bool

    static let commandLineLimit = 512

    /// The question in two lines (three when it came through authgate's CLI): what askpass
    /// programs show.
    var text: String {
        let session = session == .default ? "" : " (session \(session.rawValue))"
        let via = through.map { "\nthrough: \($0)" } ?? ""
        return "Allow \(executable) (pid \(pid), uid \(uid)) to use your \(providerName) sign-in\(session)?\n\(commandLine)\(via)"
    }

    /// What the question tells a program in its environment besides the text, one fact a
    /// variable, for an askpass program that shows them its own way.
    var environment: [String] {
        [
            "AUTHGATE_CONSENT_PROVIDER=\(provider.rawValue)", "AUTHGATE_CONSENT_SESSION=\(session.rawValue)",
            "AUTHGATE_CONSENT_UID=\(uid)", "AUTHGATE_CONSENT_PID=\(pid)", "AUTHGATE_CONSENT_EXECUTABLE=\(executable)",
            "AUTHGATE_CONSENT_COMMAND=\(commandLine)", "AUTHGATE_CONSENT_THROUGH=\(through ?? "")",
            "AUTHGATE_CONSENT_ALWAYS=\(canAllowAlways ? "yes" : "no")",
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
    /// The daemon's desktop environment (``DesktopSession``), `NAME=value`, for the desktop's
    /// owner's questions; other users' questions get it without the session's variables.
    let environment: DesktopEnvironment

    var description: String { "askpass \(path)" }

    func ask(_ question: ConsentQuestion, timeout: Duration) async -> ConsentReply {
        let child = ChildProcess(
            path: path,
            arguments: [question.text],
            environment: environment.lines(for: question.uid) + ["SSH_ASKPASS_PROMPT=confirm"] + question.environment
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
    let environment: DesktopEnvironment

    var description: String { "notification via \(program)" }

    static let labels: KeyValuePairs<ConsentAnswer, String> = [
        .once: "Allow once", .running: "Allow while it runs", .always: "Always allow", .deny: "Deny",
    ]

    func ask(_ question: ConsentQuestion, timeout: Duration) async -> ConsentReply {
        guard question.uid == environment.owner else {
            return .failed("the desktop authgated can reach is uid \(environment.owner)'s, not uid \(question.uid)'s")
        }
        let lines = question.text.split(separator: "\n", maxSplits: 1)
        var arguments = ["--app-name=authgate", "--icon=dialog-password", "--urgency=critical"]
        arguments += Self.labels.filter { question.canAllowAlways || $0.key != .always }.map { "--action=\($0.key.rawValue)=\($0.value)" }
        // Both are shown as markup by some notification servers: the summary holds the
        // program's path, which its owner chose.
        arguments += ["--", SignInNotifier.markupEscaped(String(lines.first ?? "")), SignInNotifier.markupEscaped(lines.dropFirst().joined())]
        let child = ChildProcess(path: program, arguments: arguments, environment: environment.lines(for: question.uid))
        switch await child.runSuspending(input: [], timeout: timeout) {
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
        let lines = DesktopEnvironment(
            lines: desktop?.environmentLines ?? DesktopSession.withoutDaemonVariables(environment),
            owner: DesktopEnvironment.owner(of: environment)
        )
        for variable in ["AUTHGATE_ASKPASS", "SSH_ASKPASS"] {
            if let path = environment[variable], path.hasPrefix("/") { return AskpassProgram(path: path, environment: lines) }
        }
        if let path = ChildProcess.find("ssh-askpass", in: environment["PATH"]) { return AskpassProgram(path: path, environment: lines) }
        let notifySend = environment["AUTHGATE_NOTIFY_SEND"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? desktop?.program("notify-send")
        if desktop != nil, let notifySend { return NotificationQuestion(program: notifySend, environment: lines) }
        return nil
    }
}

/// The environment consent's helpers run with: the daemon's desktop session's, for its owner's
/// questions only. A system daemon started with a user's environment (`sudo -E`) must not put
/// every uid's questions on that user's display or bus: other uids' get the environment without
/// the session's variables (an askpass program then has no display to show them on, and denies).
struct DesktopEnvironment: Sendable {
    let lines: [String]
    /// The uid whose desktop the variables name: the owner of `XDG_RUNTIME_DIR`, else the daemon's.
    let owner: UInt32

    static let sessionVariables: Set<String> = [
        "DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XAUTHORITY", "XDG_SESSION_ID", "XDG_SESSION_TYPE",
        "XDG_SEAT", "XDG_VTNR", "SWAYSOCK", "I3SOCK",
    ]

    func lines(for uid: UInt32) -> [String] {
        uid == owner ? lines : lines.filter { line in !Self.sessionVariables.contains(String(line.prefix { $0 != "=" })) }
    }

    static func owner(of environment: [String: String]) -> UInt32 {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), let info = StorageFiles.pathStatus(runtime), info.isDirectory {
            return info.owner
        }
        return geteuid()
    }
}
