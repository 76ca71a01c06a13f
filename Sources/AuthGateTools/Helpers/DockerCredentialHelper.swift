import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// docker's credential helper protocol (docker-credential-helpers) as `docker-credential-authgate`
/// speaks it: `get` answers the session's token for the registry a provider lists for docker,
/// `list` names those registries, `erase` (docker logout) signs the session out, `store` (docker
/// login) is refused with the command to sign in instead. docker reads the answer and an
/// error alike from stdout, and a failure from the exit status. The command reads stdin and
/// prints; this decides.
package struct DockerCredentialHelper {
    package static let name = "docker-credential-authgate"
    package static let usage = "Usage: \(name) <store|get|erase|list|version>"
    /// What docker expects when a helper has nothing for a registry (docker-credential-helpers'
    /// `credentials.ErrCredentialsNotFound`).
    package static let notFound = "credentials not found in native keychain"

    /// What to print on stdout (one line), whether the helper fails (exit 1), and a sentence for
    /// the person on stderr.
    package struct Answer: Equatable {
        package var output: String
        package var failed = false
        package var note: String? = nil

        package init(output: String, failed: Bool = false, note: String? = nil) {
            self.output = output
            self.failed = failed
            self.note = note
        }
    }

    package var socket: String?

    package init(socket: String?) {
        self.socket = socket
    }

    /// docker's `action`; `input` reads the line docker writes on stdin (the server URL, or
    /// `store`'s JSON), only for the actions that have one.
    package func perform(_ action: String, input: () -> String) throws -> Answer {
        switch action {
        case "-v", "--version", "version":
            return Answer(output: "\(Self.name) (authgate) \(AuthGateVersion.current)")
        case "-h", "--help":
            return Answer(output: Self.usage)
        case "get":
            let serverURL = input()
            guard let host = CredentialHost.fromServerURL(serverURL),
                let credential = try CredentialHosts.credential(host: host, tool: "docker", socket: socket)
            else { return Answer(output: Self.notFound, failed: true) }
            let answer = JSONValue.object([
                "Secret": .string(credential.token.token), "ServerURL": .string(serverURL), "Username": .string(credential.username),
            ])
            return Answer(output: String(decoding: answer.jsonBytes, as: UTF8.self))
        case "list":
            // A provider with paths serves git only: docker's requests name no path.
            let servers = try CredentialHosts.all(socket: socket).filter { $0.helper.tools.contains("docker") && $0.helper.paths.isEmpty }
                .flatMap { listing in listing.helper.hosts.map { ($0, JSONValue.string(listing.helper.username)) } }
            // A host belongs to one provider (the loader refuses a second); the first would win.
            let answer = JSONValue.object(Dictionary(servers, uniquingKeysWith: { first, _ in first }))
            return Answer(output: String(decoding: answer.jsonBytes, as: UTF8.self))
        case "erase":
            // docker logout: the session ends, as signing out of the registry means.
            let serverURL = input()
            guard let host = CredentialHost.fromServerURL(serverURL),
                let mapping = try CredentialHosts.provider(for: host, path: nil, socket: socket, tool: "docker").0
            else { return Answer(output: Self.notFound, failed: true) }
            let removed = try DaemonConnection(socket: socket).call(.logout, LogoutParams(provider: mapping.provider), as: LogoutResult.self).removed
            return Answer(
                output: "",
                note: removed
                    ? "signed out of \(Terminal.safe(mapping.provider)) (docker logout \(Terminal.safe(host)))."
                    : "there was no session with \(Terminal.safe(mapping.provider)) to sign out of."
            )
        case "store":
            // docker login: the daemon signs in with the provider, never with a password docker holds.
            let payload = (try? JSONValue.parse(Data(input().utf8)))?.objectValue
            let host = payload?["ServerURL"]?.stringValue.flatMap(CredentialHost.fromServerURL)
            let provider = try host.flatMap { try CredentialHosts.provider(for: $0, path: nil, socket: socket, tool: "docker").0 }?.provider
            return Answer(
                output:
                    "authgate does not store credentials from docker login: sign in with `authgate login \(provider.map(Terminal.safe) ?? "PROVIDER")`, and docker gets the session's token. [invalid_request]",
                failed: true
            )
        default:
            return Answer(output: "\(Self.name): unknown action: \(Terminal.safe(action))", failed: true)
        }
    }
}

extension DockerCredentialHelper {
    /// The helper as docker runs it (`docker-credential-authgate ACTION`, one action, without
    /// the argument parser: its usage errors are not docker's), and `configure` or `unconfigure
    /// REGISTRY`. A failed step is answered as docker's own helpers answer one: its sentence on
    /// stdout (docker shows what a helper printed there), failed.
    /// - Throws: Only `configure`'s and `unconfigure`'s failures, which are a person's, not docker's.
    package func serve(_ arguments: [String], input: () -> String) throws -> Answer {
        if let first = arguments.first, first == "configure" || first == "unconfigure" {
            guard arguments.count == 2 else {
                throw ToolFailure("\(first) needs the registry: \(Self.name) \(first) REGISTRY [invalid_params]", status: ToolFailure.usage)
            }
            return Answer(output: try DockerConfiguration.apply(configure: first == "configure", registry: arguments[1]))
        }
        guard arguments.count == 1 else { return Answer(output: Self.usage, failed: true) }
        do {
            return try perform(arguments[0], input: input)
        } catch let failure as ToolFailure {
            return Answer(output: "authgate: \(failure)", failed: true)
        }
    }
}
