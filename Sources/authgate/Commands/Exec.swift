import ArgumentParser
import AuthGateCore
import AuthGateRPC
#if canImport(Glibc)
import Glibc
#endif

/// `authgate exec PROVIDER -- CMD [ARGS…]`: runs CMD with a valid token in its environment,
/// never in its argv (which every local user can read in /proc). The CLI `execvp`s CMD, so no
/// wrapper process stays and the exit status is CMD's own.
struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command with a valid token in an environment variable (never in its arguments).",
        discussion: """
            authgate replaces itself with the command (execvp): its exit status is the command's. \
            Example: authgate exec corp -- sh -c 'curl -H "Authorization: Bearer $AUTHGATE_TOKEN" https://api.example.com/'
            """)

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(help: ArgumentHelp("The variable that holds the token.", valueName: "name"))
    var env = "AUTHGATE_TOKEN"

    @Option(name: .customLong("min-valid"), help: ArgumentHelp("The token must stay valid this many seconds (refreshed first otherwise).", valueName: "seconds"))
    var minValid = 60

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else { throw ValidationError("Name the command after --, e.g. authgate exec corp -- kubectl get pods.") }
        guard !env.isEmpty, env.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }),
              !(0x30...0x39).contains(env.utf8.first ?? 0) else {
            throw ValidationError("--env must be a variable name: letters, digits and _, not starting with a digit.")
        }
    }

    func run() throws {
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
}
