import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `docker-credential-authgate get|list|store|erase|version`: the docker-credential-helpers
/// protocol, answered as docker/docker-credential-helpers' own helpers answer it: errors on
/// stdout (docker shows what a helper printed there) with exit status 1, `-v` and `version`
/// print the version. A server URL with a scheme other than `https://` gets the not-found
/// answer; a bare host (how docker names registries) is taken as HTTPS.
struct DockerCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential",
        abstract: "docker's credential helper: a token for the registries a provider's credential_helper lists.",
        discussion: """
            In ~/.docker/config.json: "credHelpers": {"registry.example.com": "authgate"}, which `configure \
            REGISTRY` writes (and `unconfigure REGISTRY` removes), keeping the rest of the file. `get` answers the \
            session's token; `erase` (docker logout) signs the session out; `store` (docker login) is refused: sign in \
            with `authgate login PROVIDER`; `list` names the registries of providers whose credential_helper.tools \
            include docker.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "get, list, store, erase or version (docker says which), or configure or unconfigure.")
    var operation: String

    @Argument(help: "configure, unconfigure: the registry (host or host:port) whose credHelpers entry to write or remove.")
    var registry: String?

    /// What docker matches to tell "no credentials" from a failure.
    static let name = DockerCredentialHelper.name

    func run() throws {
        try Self.serve([operation] + (registry.map { [$0] } ?? []), socket: global.socket)
    }

    /// The helper as docker runs it (`docker-credential-authgate ACTION`), without the argument
    /// parser: its usage errors are not docker's.
    static func serve(_ arguments: [String], socket: String?) throws {
        if let first = arguments.first, first == "configure" || first == "unconfigure" {
            guard arguments.count == 2 else {
                throw ToolFailure("\(first) needs the registry: \(name) \(first) REGISTRY [invalid_params]", status: ToolFailure.usage)
            }
            return print(try DockerConfiguration.apply(configure: first == "configure", registry: arguments[1]))
        }
        do {
            guard arguments.count == 1 else {
                print(DockerCredentialHelper.usage)
                throw ExitCode(1)
            }
            try perform(arguments[0], socket: socket)
        } catch let failure as ToolFailure {
            // docker reads a helper's error from its stdout.
            print("authgate: \(failure)")
            throw ExitCode(1)
        }
    }

    /// docker's `action` (``DockerCredentialHelper``): its answer on stdout, its note on stderr.
    private static func perform(_ action: String, socket: String?) throws {
        let answer = try DockerCredentialHelper(socket: socket).perform(action) { readLine(strippingNewline: true) ?? "" }
        if !answer.output.isEmpty { print(answer.output) }
        if let note = answer.note { Terminal.writeError("authgate: \(note)\n") }
        if answer.failed { throw ExitCode(1) }
    }
}
