import ArgumentParser
import AuthGateTools

/// `git-credential-authgate get|store|erase` (a link to `authgate`, which dispatches on the
/// name it was run by; also `authgate git-credential …`): git's credential helper protocol.
/// `get` for an `https` request to a host a provider lists answers its user name and the
/// session's token; for any other host or protocol (or none named) it answers nothing, so git
/// asks its other helpers. `configure HOST` / `unconfigure HOST` write and remove the git
/// config lines that make this helper the only one for the host.
struct GitCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "git's credential helper: a token for the hosts a provider's credential_helper lists.",
        discussion: """
            `authgate git-credential configure git.example.com` sets it up for a host in ~/.gitconfig: \
            credential.https://git.example.com.helper '' (which keeps helpers configured for every host, such as \
            cache or libsecret, out of this one), then credential.https://git.example.com.helper authgate (git runs \
            git-credential-authgate); with --use-http-path also credential.https://git.example.com.useHttpPath true, \
            for providers with credential_helper.paths. Running it again changes nothing; \
            `unconfigure git.example.com` removes those lines. With -verbose (credential.helper "authgate -verbose"), \
            the helper says on stderr which provider and session answered, or why none did; \
            `git-credential-authgate version` prints the version.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(name: .customLong("verbose", withSingleDash: true), help: "Say on stderr which provider and session answered, or why none did.")
    var verbose = false

    @Argument(help: "get, store, erase or version (git says which), or configure or unconfigure.")
    var operation: String

    @Argument(help: "configure, unconfigure: the host (host or host:port) whose git config lines to write or remove.")
    var host: String?

    @Flag(help: "configure: also set credential.https://HOST.useHttpPath true; unconfigure: also remove it.")
    var useHttpPath = false

    func run() throws {
        switch operation {
        case "configure", "unconfigure":
            guard let host else { throw ValidationError("\(operation) needs the host: authgate git-credential \(operation) HOST") }
            if operation == "configure", let warning = GitConfiguration.coverageWarning(host: host, useHttpPath: useHttpPath, socket: global.socket) {
                Terminal.writeError("authgate: warning: \(warning)\n")
            }
            let done = try GitConfiguration.apply(configure: operation == "configure", host: host, useHttpPath: useHttpPath)
            print(done.output, terminator: "")
            if let note = done.note { Terminal.writeError("authgate: \(note)\n") }
        default:
            guard host == nil, !useHttpPath else { throw ValidationError("a host and --use-http-path are for configure and unconfigure") }
            try Self.perform(operation, socket: global.socket, verbose: verbose)
        }
    }

    /// git's `operation`, with the attributes it sends on stdin (``GitCredentialHelper``).
    static func perform(_ operation: String, socket: String?, verbose: Bool = false) throws {
        print(try GitCredentialHelper.run(operation, socket: socket, verbose: verbose), terminator: "")
    }
}
