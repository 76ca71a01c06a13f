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
    static let notFound = "credentials not found in native keychain"
    static let name = "docker-credential-authgate"
    static let usage = "Usage: \(name) <store|get|erase|list|version>"

    func run() throws {
        try Self.serve([operation] + (registry.map { [$0] } ?? []), socket: global.socket)
    }

    /// The helper as docker runs it (`docker-credential-authgate ACTION`), without the argument
    /// parser: its usage errors are not docker's.
    static func serve(_ arguments: [String], socket: String?) throws {
        if let first = arguments.first, first == "configure" || first == "unconfigure" {
            guard arguments.count == 2 else {
                throw CLIError(message: "\(first) needs the registry: \(name) \(first) REGISTRY [invalid_params]", exitCode: .validationFailure)
            }
            return print(try DockerConfiguration.apply(configure: first == "configure", registry: arguments[1]))
        }
        do {
            guard arguments.count == 1 else {
                print(usage)
                throw ExitCode(1)
            }
            try perform(arguments[0], socket: socket)
        } catch let error as CLIError {
            // docker reads a helper's error from its stdout.
            print("authgate: \(error.message)")
            throw ExitCode(1)
        } catch let failure as ToolFailure {
            print("authgate: \(failure)")
            throw ExitCode(1)
        }
    }

    private static func perform(_ action: String, socket: String?) throws {
        switch action {
        case "-v", "--version", "version":
            print("\(name) (authgate) \(AuthGateVersion.current)")
        case "-h", "--help":
            print(usage)
        case "get":
            let serverURL = readLine(strippingNewline: true) ?? ""
            guard let host = CredentialHost.fromServerURL(serverURL),
                let credential = try CredentialHosts.credential(
                    host: host,
                    tool: "docker",
                    socket: socket,
                    signIn: { provider, session in try PointOfUseSignIn.run(provider: provider, session: session, socket: socket, tool: "docker") }
                )
            else {
                print(notFound)
                throw ExitCode(1)
            }
            let answer = JSONValue.object([
                "Secret": .string(credential.token.token), "ServerURL": .string(serverURL), "Username": .string(credential.username),
            ])
            print(String(decoding: answer.jsonBytes, as: UTF8.self))
        case "list":
            // A provider with paths serves git only: docker's requests name no path.
            let servers = try CredentialHosts.all(socket: socket).filter { $0.helper.tools.contains("docker") && $0.helper.paths.isEmpty }
                .flatMap { listing in listing.helper.hosts.map { ($0, JSONValue.string(listing.helper.username)) } }
            // A host belongs to one provider (the loader refuses a second); the first would win.
            let answer = JSONValue.object(Dictionary(servers, uniquingKeysWith: { first, _ in first }))
            print(String(decoding: answer.jsonBytes, as: UTF8.self))
        case "erase":
            // docker logout: the session ends, as signing out of the registry means.
            let serverURL = readLine(strippingNewline: true) ?? ""
            guard let host = CredentialHost.fromServerURL(serverURL),
                let mapping = try CredentialHosts.provider(for: host, path: nil, socket: socket, tool: "docker").0
            else {
                print(notFound)
                throw ExitCode(1)
            }
            let removed = try DaemonConnection(socket: socket, json: false).call(.logout, LogoutParams(provider: mapping.provider), as: LogoutResult.self)
                .removed
            Terminal.writeError(
                removed
                    ? "authgate: signed out of \(Terminal.safe(mapping.provider)) (docker logout \(Terminal.safe(host))).\n"
                    : "authgate: there was no session with \(Terminal.safe(mapping.provider)) to sign out of.\n"
            )
        case "store":
            // docker login: the daemon signs in with the provider, never with a password docker holds.
            let payload = (try? JSONValue.parse(Data((readLine(strippingNewline: true) ?? "").utf8)))?.objectValue
            let host = payload?["ServerURL"]?.stringValue.flatMap(CredentialHost.fromServerURL)
            let provider = try host.flatMap { try CredentialHosts.provider(for: $0, path: nil, socket: socket, tool: "docker").0 }?.provider
            print(
                "authgate does not store credentials from docker login: sign in with `authgate login \(provider.map(Terminal.safe) ?? "PROVIDER")`, and docker gets the session's token. [invalid_request]"
            )
            throw ExitCode(1)
        default:
            print("\(name): unknown action: \(Terminal.safe(action))")
            throw ExitCode(1)
        }
    }
}
