import ArgumentParser
import AuthGateClient
import AuthGateCore
import AuthGateRPC
import CLinux
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `authgate exec PROVIDER -- CMD [ARGS…]`: runs CMD with a valid token in its environment,
/// never in its argv (which every local user can read in /proc). The CLI `execvp`s CMD, so no
/// wrapper process stays and the exit status is CMD's own.
///
/// With `--restart-on-change` or `--signal-on-change SIG` it stays as CMD's supervisor instead
/// (``Supervisor``): it follows the session's token and, on each new one, restarts CMD with it
/// or writes it to `--token-file` and signals CMD.
struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command with a valid token in an environment variable (never in its arguments).",
        discussion: """
            authgate replaces itself with the command (execvp): its exit status is the command's. \
            Example: authgate exec corp -- sh -c 'curl -H "Authorization: Bearer $AUTHGATE_TOKEN" https://api.example.com/'

            For a long-running command, --restart-on-change or --signal-on-change SIG keep authgate as a small \
            supervisor: it forwards SIGINT, SIGTERM and SIGHUP to the command, exits with its status (128+N when \
            signal N killed it), and on each new token (a refresh, a new sign-in) either stops the command (SIGTERM) \
            and starts it again with the new token, or writes the token to --token-file (atomically, like a sink) \
            and sends the command SIG. Example: authgate exec corp --signal-on-change HUP --token-file \
            $XDG_RUNTIME_DIR/corp.token -- my-daemon --token-file $XDG_RUNTIME_DIR/corp.token
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(help: ArgumentHelp("The variable that holds the token.", valueName: "name"))
    var env = "AUTHGATE_TOKEN"

    @Option(
        name: .customLong("min-valid"),
        help: ArgumentHelp("The token must stay valid this many seconds (refreshed first otherwise).", valueName: "seconds")
    )
    var minValid = 60

    @Flag(name: .customLong("restart-on-change"), help: "Stay as a supervisor; restart the command with each new token.")
    var restartOnChange = false

    @Option(
        name: .customLong("signal-on-change"),
        help: ArgumentHelp(
            "Stay as a supervisor; send the command this signal (HUP, USR1, …) after each new token is written to --token-file.",
            valueName: "signal"
        )
    )
    var signalOnChange: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp("With a supervisor: keep the current token in this file (mode 0400, replaced atomically).", valueName: "path")
    )
    var tokenFile: String?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else { throw ValidationError("Name the command after --, e.g. authgate exec corp -- kubectl get pods.") }
        guard TokenFileFormat.isVariableName(env) else {
            throw ValidationError("--env must be a variable name: letters, digits and _, not starting with a digit.")
        }
        guard !(restartOnChange && signalOnChange != nil) else {
            throw ValidationError("--restart-on-change and --signal-on-change exclude each other: restart the command or signal it.")
        }
        if let signalOnChange, Self.signalNumber(signalOnChange) == nil {
            throw ValidationError("--signal-on-change \(signalOnChange) is not a signal: use a name such as HUP, USR1 or USR2, or a number.")
        }
        guard tokenFile == nil || restartOnChange || signalOnChange != nil else {
            throw ValidationError("--token-file goes with --restart-on-change or --signal-on-change.")
        }
        guard signalOnChange == nil || tokenFile != nil else {
            throw ValidationError("--signal-on-change needs --token-file: a running command cannot be handed a new environment.")
        }
    }

    func run() throws {
        guard restartOnChange || signalOnChange != nil else { return try replaceSelf() }
        // First, before any thread exists: every thread inherits the blocked signals.
        let signals = ag_supervisor_signals()
        guard signals >= 0 else {
            throw CLIError(message: "cannot handle signals: \(String(cString: strerror(errno))).", exitCode: ExitStatus.internalError)
        }
        let params = TokenParams(provider: selection.provider, session: selection.session, minValidSeconds: minValid)
        let first = try global.call(.token, params, as: TokenResult.self)
        var file: TokenFile?
        if let tokenFile {
            switch FileTrust.openDirectory(of: tokenFile, as: .tokenFile) {
            case .success(let directory): file = TokenFile(directory, shown: tokenFile)
            case .failure(let problem):
                throw CLIError(message: "the supervisor writes no token file: \(Terminal.safe(problem.description)).", exitCode: .validationFailure)
            }
        }
        let supervisor = Supervisor(
            command: command,
            variable: env,
            tokenFile: file,
            signals: signals,
            onChange: restartOnChange ? .restart : .signal(Self.signalNumber(signalOnChange ?? "") ?? SIGHUP)
        )
        let follower = TokenFollower(
            socketPath: global.socket ?? SocketLocation.forClient(),
            params: params,
            notice: { Terminal.writeError("authgate exec: \(Terminal.safe($0))\n") }
        )
        throw ExitCode(try supervisor.run(first: first, follower: follower))
    }

    /// Without a supervisor: `execvp`, as always.
    private func replaceSelf() throws {
        let params = TokenParams(provider: selection.provider, session: selection.session, minValidSeconds: minValid)
        let result = try global.call(.token, params, as: TokenResult.self)
        guard setenv(env, result.accessToken.exposedValue, 1) == 0 else {
            throw CLIError(message: "cannot set \(env) for the command.", exitCode: ExitStatus.internalError)
        }
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        execvp(command[0], arguments)
        // Only reached when the command could not be started.
        let reason = String(cString: strerror(errno))
        throw CLIError(message: "cannot run \(Terminal.safe(command[0])): \(reason)", exitCode: ExitCode(errno == ENOENT ? 127 : 126))
    }

    /// A signal's number from its name (`HUP`, `SIGHUP`, case-insensitive) or number.
    static func signalNumber(_ text: String) -> Int32? {
        if let number = Int32(text), (1..<65).contains(number) { return number }
        var name = text.uppercased()
        if name.hasPrefix("SIG") { name.removeFirst(3) }
        let names: [String: Int32] = [
            "HUP": SIGHUP, "INT": SIGINT, "QUIT": SIGQUIT, "TERM": SIGTERM, "USR1": SIGUSR1,
            "USR2": SIGUSR2, "ALRM": SIGALRM, "WINCH": SIGWINCH, "CONT": SIGCONT,
        ]
        return names[name]
    }
}

/// `authgate exec --restart-on-change` / `--signal-on-change`: runs the command as a child and
/// stays with it.
///
/// The main thread waits (`poll`) on a signalfd and on a pipe from the thread that follows the
/// token (``TokenFollower``). SIGINT, SIGTERM and SIGHUP are forwarded to the child; the
/// child's end ends the supervisor with its status (128+N for signal N, as shells report it).
/// A new token restarts the child (SIGTERM, wait, start with the new token) or is written to
/// the token file before the child gets its signal. Restarts are serialised: tokens that come
/// while the child is stopping make one restart, with the newest token.
final class Supervisor {
    enum OnChange {
        case restart
        case signal(Int32)
    }

    /// What the following thread hands the main thread.
    private struct Inbox {
        var token: TokenResult?
        var failure: String?
    }

    private final class Mailbox: Sendable {
        let contents = Mutex(Inbox())
    }

    private let command: [String]
    private let variable: String
    private let tokenFile: TokenFile?
    private let signals: Int32
    private let onChange: OnChange
    private let inbox = Mailbox()

    init(command: [String], variable: String, tokenFile: TokenFile?, signals: Int32, onChange: OnChange) {
        self.command = command
        self.variable = variable
        self.tokenFile = tokenFile
        self.signals = signals
        self.onChange = onChange
    }

    /// Runs the command until it ends (not for a restart); returns the exit status to pass on.
    func run(first: TokenResult, follower: TokenFollower) throws -> Int32 {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0,
            pipeEnds.allSatisfy({ fcntl($0, F_SETFD, FD_CLOEXEC) == 0 && fcntl($0, F_SETFL, O_NONBLOCK) == 0 })
        else {
            throw CLIError(message: "cannot make a pipe: \(String(cString: strerror(errno))).", exitCode: ExitStatus.internalError)
        }
        var current = first
        try writeFile(current)
        var child = try spawn(with: current)
        let wake = pipeEnds[1]
        let inbox = self.inbox
        DispatchQueue.global().async {
            do {
                try follower.runReporting(once: false) { event in
                    switch event {
                    case .token(let token):
                        inbox.contents.withLock { $0.token = token }
                        _ = write(wake, "t", 1)
                    case .ended(let ended):
                        Terminal.writeError("authgate exec: the session ended (\(ended.reason.rawValue)); the command keeps its token until a new sign-in.\n")
                    case .unavailable:
                        break
                    }
                    return true
                }
            } catch {
                inbox.contents.withLock { $0.failure = "\(error)" }
                _ = write(wake, "f", 1)
            }
        }
        var stopping = false  // a restart's SIGTERM was sent; the child's end starts it again
        var descriptors = [pollfd(fd: signals, events: Int16(POLLIN), revents: 0), pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&descriptors, 2, -1) >= 0 || errno == EINTR else {
                throw CLIError(message: "cannot wait for the command: \(String(cString: strerror(errno))).", exitCode: ExitStatus.internalError)
            }
            if descriptors[0].revents != 0 {
                let signal = ag_read_signal(signals)
                if signal == SIGCHLD {
                    var status: Int32 = 0
                    let reaped = waitpid(child, &status, WNOHANG)
                    if reaped == child {
                        guard stopping else { return Self.exitStatus(status) }
                        stopping = false
                        child = try spawn(with: current)
                    }
                } else if signal > 0 {
                    kill(child, signal)
                }
            }
            if descriptors[1].revents != 0 {
                var byte: UInt8 = 0
                while read(pipeEnds[0], &byte, 1) == 1 {}
                let (token, failure) = inbox.contents.withLock { inbox in
                    defer { inbox = Inbox() }
                    return (inbox.token, inbox.failure)
                }
                if let failure {
                    Terminal.writeError("authgate exec: no longer follows the token: \(Terminal.safe(failure)); the command keeps running.\n")
                }
                if let token, token.accessToken.exposedValue != current.accessToken.exposedValue {
                    current = token
                    try? writeFile(current)
                    switch onChange {
                    case .restart:
                        Terminal.writeError("authgate exec: a new token (\(Terminal.validity(token.expiresAt))); restarting the command.\n")
                        if !stopping {
                            stopping = true
                            kill(child, SIGTERM)
                        }
                    case .signal(let signal):
                        Terminal.writeError(
                            "authgate exec: a new token (\(Terminal.validity(token.expiresAt))); sent the command signal \(signal).\n"
                        )
                        kill(child, signal)
                    }
                }
            }
        }
    }

    /// The token file, when there is one, holds `token`.
    private func writeFile(_ token: TokenResult) throws {
        guard let tokenFile else { return }
        do {
            try tokenFile.write(try TokenFileFormat.raw.render(token), mode: 0o400)
        } catch {
            Terminal.writeError("authgate exec: cannot write the token file: \(error)\n")
            throw CLIError(message: "the token file was not written.", exitCode: ExitStatus.internalError)
        }
    }

    /// Starts the command with `token` in its environment.
    private func spawn(with token: TokenResult) throws -> pid_t {
        let prefix = variable + "="
        var environment: [String] = []
        var entry: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if !text.hasPrefix(prefix) { environment.append(text) }
            entry += 1
        }
        environment.append(prefix + token.accessToken.exposedValue)
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        let variables: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            for item in arguments { free(item) }
            for item in variables { free(item) }
        }
        var pid: pid_t = 0
        let failed = ag_spawn_child(&pid, command[0], arguments, variables, 0)
        guard failed == 0 else {
            throw CLIError(
                message: "cannot run \(Terminal.safe(command[0])): \(String(cString: strerror(failed)))",
                exitCode: ExitCode(failed == ENOENT ? 127 : 126)
            )
        }
        return pid
    }

    /// A wait status as a shell reports it: the exit code, or 128+N for signal N.
    static func exitStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}
