import ArgumentParser
import AuthGateTools

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

    func run() throws {
        try Self.serve([operation] + (registry.map { [$0] } ?? []), socket: global.socket)
    }

    /// The helper as docker runs it (``DockerCredentialHelper/serve(_:input:)``): its answer on
    /// stdout, its note on stderr, exit status 1 when it failed.
    static func serve(_ arguments: [String], socket: String?) throws {
        let answer = try DockerCredentialHelper(socket: socket).serve(arguments) { readLine(strippingNewline: true) ?? "" }
        if !answer.output.isEmpty { print(answer.output) }
        if let note = answer.note { Terminal.writeError("authgate: \(note)\n") }
        if answer.failed { throw ExitCode(1) }
    }
}
