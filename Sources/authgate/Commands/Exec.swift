import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import CLinux

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
            Example (printf is the shell's builtin, so the token reaches no command's arguments, which every local user \
            can read): authgate exec corp -- sh -c 'printf "Authorization: Bearer %s\\n" "$AUTHGATE_TOKEN" | curl -H @- \
            https://api.example.com/'

            For a long-running command, --restart-on-change or --signal-on-change SIG keep authgate as a small \
            supervisor: it forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the command (a terminal's Ctrl-C reaches \
            the command directly), ends it with SIGTERM when killed itself, exits with its status (128+N when \
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

    /// The flags as typed, for Supervisor to check and to run with.
    private var flags: Supervisor.Flags {
        Supervisor.Flags(command: command, variable: env, restartOnChange: restartOnChange, signalOnChange: signalOnChange, tokenFile: tokenFile)
    }

    func validate() throws {
        if let problem = flags.problem { throw ValidationError(problem) }
    }

    func run() throws {
        guard let onChange = flags.onChange else { return try replaceSelf() }
        // First, before any thread exists: every thread inherits the blocked signals.
        let signals = ag_supervisor_signals()
        guard signals >= 0 else {
            throw ToolFailure("cannot handle signals: \(String(cString: strerror(errno))).", status: ToolFailure.internalError)
        }
        let status = try Supervisor.supervise(
            command: command,
            variable: env,
            tokenFile: tokenFile,
            signals: signals,
            onChange: onChange,
            params: TokenParams(provider: selection.provider, session: selection.session, minValidSeconds: minValid),
            daemon: global.daemon
        )
        throw ExitCode(status)
    }

    /// Without a supervisor: `execvp`, as always.
    private func replaceSelf() throws {
        let params = TokenParams(provider: selection.provider, session: selection.session, minValidSeconds: minValid)
        let result = try global.daemon.call(.token, params, as: TokenResult.self)
        guard setenv(env, result.accessToken.exposedValue, 1) == 0 else {
            throw ToolFailure("cannot set \(env) for the command.", status: ToolFailure.internalError)
        }
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        execvp(command[0], arguments)
        // Only reached when the command could not be started.
        let reason = String(cString: strerror(errno))
        throw ToolFailure("cannot run \(Terminal.safe(command[0])): \(reason)", status: errno == ENOENT ? 127 : 126)
    }
}
