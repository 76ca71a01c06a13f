import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// `authgate`: the command-line client of `authgated`, and every other program of authgate by
/// the name it is run by (``Invocation``): the daemon and git's and docker's helpers.
@main
struct AuthGate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authgate",
        abstract: "Sign in to identity providers through authgated and use their tokens.",
        discussion: """
            Exit status: 0 success, 1 internal error, 2 daemon unreachable, 3 sign-in required, \
            4 wrong credentials, 5 input refused, 6 provider unknown or unusable, \
            7 provider unreachable or failing, 8 not allowed or rate limited, 9 a check of `provider test` failed, \
            64 usage error.
            """,
        version: AuthGateVersion.current,
        subcommands: [
            Providers.self, ProviderFiles.self, Login.self, Register.self, Token.self, DPoPProof.self, Exec.self, Kubectl.self, GitCredential.self,
            DockerCredential.self, Sink.self, Proxy.self, Userinfo.self, Status.self, Consent.self, Logout.self, Reload.self, Rekey.self, Info.self,
            Metrics.self,
        ]
    )

    /// Like ArgumentParser's, but a failed call prints one sentence and exits with its class's status.
    static func main() {
        // Line by line even into a pipe: a script or GUI reading `login --browser --json` must
        // get the URL to open when it is printed, not when the sign-in ends.
        ag_line_buffer_stdout()
        do {
            switch Invocation(argc: CommandLine.argc, argv: CommandLine.unsafeArgv) {
            case .daemon(let arguments): AuthGated.start(arguments)
            case .dockerCredential(let arguments): try DockerCredential.serve(arguments, socket: nil)
            case .gitCredential(let operation, let verbose): try GitCredential.perform(operation, socket: nil, verbose: verbose)
            case .token(let provider): print(try DaemonConnection(socket: nil).accessToken(TokenParams(provider: provider)))
            case .kubectl(let provider): try Kubectl.printCredential(provider: provider, session: nil, socket: nil)
            case .parse(let arguments):
                var command = try parseAsRoot(arguments)
                try command.run()
            }
        } catch let failure as ToolFailure where failure.showsUsage {
            exit(withError: ValidationError(failure.description))
        } catch let failure as ToolFailure {
            Terminal.writeError("authgate: \(failure.description)\n")
            Glibc.exit(failure.status)
        } catch {
            exit(withError: error)
        }
    }
}

/// Which session a command is about: a provider and, optionally, a session name.
struct SessionSelection: ParsableArguments {
    @Argument(help: "The provider's id (see `authgate providers`).")
    var provider: String

    @Option(help: "Name of the session (default: \"default\").")
    var session: String?
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The daemon's socket (default: $AUTHGATE_SOCKET, the user daemon's, then the system's).", valueName: "path"))
    var socket: String?

    @Flag(help: "Print JSON for scripts instead of text.")
    var json = false

    /// The daemon these options name: the calls go through it (failures are ``ToolFailure``s).
    var daemon: DaemonConnection { DaemonConnection(socket: socket, json: json) }

    /// Prints `value` as JSON on stdout.
    func printJSON<Value: Encodable>(_ value: Value) throws {
        try DaemonConnection.printJSON(value)
    }
}
