import ArgumentParser
import AuthGateCore
import AuthGateRPC
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Which provider serves which host, as the caller's `providers.list` says, and the calls the
/// helpers make. Everything goes through PlainCall: the helpers run in someone's `git pull` or
/// `docker push`, and the Codable coders' first use would be most of their cost.
enum CredentialHosts {
    /// A host's provider and the user name the helpers answer with.
    struct Mapping {
        var provider: String
        var username: String
    }

    /// Every host a provider the caller may use lists for `tool` (`git`, `docker`: its
    /// `credential_helper.tools`; a host belongs to one provider).
    static func all(socket: String?, tool: String) throws -> [String: Mapping] {
        guard case .array(let providers) = try PlainCall.result(.providersList, params: "{}", socket: socket) else { return [:] }
        var mappings: [String: Mapping] = [:]
        for provider in providers.compactMap(\.objectValue) {
            guard let id = provider["id"]?.stringValue, let helper = provider["credential_helper"]?.objectValue,
                let username = helper["username"]?.stringValue, case .array(let hosts)? = helper["hosts"]
            else { continue }
            if case .array(let tools)? = helper["tools"], !tools.contains(where: { $0.stringValue == tool }) { continue }
            for host in hosts.compactMap(\.stringValue) { mappings[host] = Mapping(provider: id, username: username) }
        }
        return mappings
    }

    static func provider(for host: String, socket: String?, tool: String) throws -> Mapping? {
        try all(socket: socket, tool: tool).first { CredentialHost.sameHost($0.key, host) }?.value
    }

    /// The provider's token, valid at least `minimumValidity` seconds.
    static func token(_ provider: String, minimumValidity: Int, socket: String?) throws -> (token: String, tokenType: String, expiresAt: Date) {
        try PlainCall.token(
            PlainCall.result(
                .token,
                params: #"{"min_valid_seconds":\#(minimumValidity),"provider":\#(JSONValue.quoted(provider))}"#,
                socket: socket
            )
        )
    }

    /// What a helper answers for a host.
    struct Credential {
        var provider: String
        var username: String
        var token: (token: String, tokenType: String, expiresAt: Date)
    }

    /// The provider that lists `host` for `tool` and its session's token, valid at least 60 s,
    /// in one call (`credential.get`). When the session needs a sign-in, it is run on the
    /// terminal if a person may be there (``PointOfUseSignIn``), else one sentence on stderr
    /// names `authgate login PROVIDER`.
    /// - Parameters:
    ///   - tool: `git` or `docker`: who asks.
    ///   - mayAsk: Whether the tool lets the helper ask (git: `GIT_TERMINAL_PROMPT` is not `0`);
    ///     with the reason to give when it does not.
    /// - Returns: `nil` when no provider lists the host, or nobody could sign in: the caller
    ///   gives its protocol's "no credentials".
    static func credential(host: String, tool: String, socket: String?, mayAsk: (Bool, why: String) = (true, "")) throws -> Credential? {
        let params = CredentialParams(host: host, tool: tool, minValidSeconds: 60)
        guard let result = try PlainCall.result(.credentialGet, params: params.plainJSON, socket: socket).objectValue,
            let provider = result["provider"]?.stringValue, let username = result["username"]?.stringValue
        else { return nil }
        if let token = result["token"], case .object = token {
            return Credential(provider: provider, username: username, token: try PlainCall.token(token))
        }
        guard mayAsk.0 else {
            Terminal.writeError("authgate: \(PointOfUseSignIn.sentence(provider: provider, session: nil, why: mayAsk.why))\n")
            return nil
        }
        guard try PointOfUseSignIn.run(provider: provider, session: nil, socket: socket, tool: tool) else {
            Terminal.writeError("authgate: \(PointOfUseSignIn.sentence(provider: provider, session: nil, why: "there is no terminal to run it on"))\n")
            return nil
        }
        return Credential(provider: provider, username: username, token: try token(provider, minimumValidity: 60, socket: socket))
    }

    /// Tells the daemon an API refused `accessToken` (`token.rejected`): if it is the current
    /// one, the session is refreshed. Best effort: the helper's caller has failed already.
    static func rejected(_ provider: String, accessToken: String, socket: String?) {
        _ = try? PlainCall.result(
            .tokenRejected,
            params: #"{"access_token":\#(JSONValue.quoted(accessToken)),"provider":\#(JSONValue.quoted(provider))}"#,
            socket: socket
        )
    }

    /// Reads `key=value` lines from stdin until a blank line or the end (git's credential protocol).
    static func readAttributes() -> [String: String] {
        CredentialHost.gitAttributes(AnyIterator { readLine(strippingNewline: true) }.prefix(1000))
    }
}

/// `git-credential-authgate get|store|erase` (a link to `authgate`, which dispatches on the
/// name it was run by; also `authgate git-credential …`): git's credential helper protocol.
/// `get` for an `https` request to a host a provider lists answers its user name and the
/// session's token; for any other host or protocol (or none named) it answers nothing, so git
/// asks its other helpers.
struct GitCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "git's credential helper: a token for the hosts a provider's credential_helper lists.",
        discussion: """
            git config --global credential.https://git.example.com.helper authgate (git runs git-credential-authgate). \
            With -verbose (credential.helper "authgate -verbose"), the helper says on stderr which provider and session \
            answered, or why none did; `git-credential-authgate version` prints the version.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(name: .customLong("verbose", withSingleDash: true), help: "Say on stderr which provider and session answered, or why none did.")
    var verbose = false

    @Argument(help: "get, store, erase or version (git says which).")
    var operation: String

    func run() throws {
        try Self.perform(operation, socket: global.socket, verbose: verbose)
    }

    static let name = "git-credential-authgate"

    /// The helper itself; `git-credential-authgate [-verbose] OPERATION` comes here without the
    /// argument parser (its start-up would be most of the call's cost, in someone's `git pull`).
    static func perform(_ operation: String, socket: String?, verbose: Bool = false) throws {
        func say(_ text: @autoclosure () -> String) {
            if verbose { Terminal.writeError("\(name): \(text())\n") }
        }
        if operation == "version" { return print("\(name) (authgate) \(AuthGateVersion.current)") }
        let attributes = CredentialHosts.readAttributes()
        // HTTPS only: a token sent over http:// (or a protocol git did not name) is a token
        // anyone on the path may read. git asks its other helpers when this one prints nothing.
        guard attributes["protocol"] == "https" else {
            return say("\(operation): nothing for protocol=\(Terminal.safe(attributes["protocol"] ?? "(none)")): tokens go to https only")
        }
        guard let host = attributes["host"].flatMap(CredentialHost.normalize) else {
            return say("\(operation): nothing for host=\(Terminal.safe(attributes["host"] ?? "(none)")): not a host name")
        }
        switch operation {
        case "get":
            // git asks its other helpers, then the user, when this one prints nothing.
            let mayAsk = ProcessInfo.processInfo.environment["GIT_TERMINAL_PROMPT"] != "0"
            guard
                let credential = try CredentialHosts.credential(
                    host: host,
                    tool: "git",
                    socket: socket,
                    mayAsk: (mayAsk, "GIT_TERMINAL_PROMPT=0 says not to ask")
                )
            else {
                return say("get: no token for \(host): no provider you may use lists it for git, or its session needs a sign-in (see above)")
            }
            say(
                "get: \(host) answered by provider \(Terminal.safe(credential.provider)), session default, user name \(Terminal.safe(credential.username)), token valid until \(Kubectl.rfc3339(credential.token.expiresAt))"
            )
            print(
                "username=\(credential.username)\npassword=\(credential.token.token)\npassword_expiry_utc=\(Int(credential.token.expiresAt.timeIntervalSince1970))"
            )
        case "erase":
            // The password git tried was refused: if it is still the session's token, the
            // session is refreshed, so the next `get` returns a new one.
            guard let password = attributes["password"], let mapping = try CredentialHosts.provider(for: host, socket: socket, tool: "git") else {
                return say("erase: nothing to do for \(host)")
            }
            CredentialHosts.rejected(mapping.provider, accessToken: password, socket: socket)
            say("erase: told provider \(Terminal.safe(mapping.provider)) that \(host) refused its token (the session is refreshed if it was current)")
        default:
            say("\(operation): nothing to do (the daemon keeps the session)")  // store
        }
    }
}

/// `docker-credential-authgate get|list|store|erase|version`: the docker-credential-helpers
/// protocol, answered as docker/docker-credential-helpers' own helpers answer it: errors on
/// stdout (docker shows what a helper printed there) with exit status 1, `-v` and `version`
/// print the version. A server URL with a scheme other than `https://` gets the not-found
/// answer; a bare host (how docker names registries) is taken as HTTPS.
struct DockerCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential",
        abstract: "docker's credential helper: a token for the registries a provider's credential_helper lists.",
        discussion: #"""
            In ~/.docker/config.json: "credHelpers": {"registry.example.com": "authgate"}. `get` answers the             session's token; `erase` (docker logout) signs the session out; `store` (docker login) is refused:             sign in with `authgate login PROVIDER`; `list` names the registries of providers whose             credential_helper.tools include docker.
            """#
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "get, list, store, erase or version (docker says which).")
    var operation: String

    /// What docker matches to tell "no credentials" from a failure.
    static let notFound = "credentials not found in native keychain"
    static let name = "docker-credential-authgate"
    static let usage = "Usage: \(name) <store|get|erase|list|version>"

    func run() throws {
        try Self.serve([operation], socket: global.socket)
    }

    /// The helper as docker runs it (`docker-credential-authgate ACTION`), without the argument
    /// parser: its usage errors are not docker's.
    static func serve(_ arguments: [String], socket: String?) throws {
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
                let credential = try CredentialHosts.credential(host: host, tool: "docker", socket: socket)
            else {
                print(notFound)
                throw ExitCode(1)
            }
            print(
                #"{"Secret":\#(JSONValue.quoted(credential.token.token)),"ServerURL":\#(JSONValue.quoted(serverURL)),"Username":\#(JSONValue.quoted(credential.username))}"#
            )
        case "list":
            let servers = try CredentialHosts.all(socket: socket, tool: "docker").sorted { $0.key < $1.key }
            print("{" + servers.map { "\(JSONValue.quoted($0.key)):\(JSONValue.quoted($0.value.username))" }.joined(separator: ",") + "}")
        case "erase":
            // docker logout: the session ends, as signing out of the registry means.
            let serverURL = readLine(strippingNewline: true) ?? ""
            guard let host = CredentialHost.fromServerURL(serverURL),
                let mapping = try CredentialHosts.provider(for: host, socket: socket, tool: "docker")
            else {
                print(notFound)
                throw ExitCode(1)
            }
            let removed = try Daemon.call(.logout, LogoutParams(provider: mapping.provider), as: LogoutResult.self, socket: socket, json: false).removed
            Terminal.writeError(
                removed
                    ? "authgate: signed out of \(Terminal.safe(mapping.provider)) (docker logout \(Terminal.safe(host))).\n"
                    : "authgate: there was no session with \(Terminal.safe(mapping.provider)) to sign out of.\n"
            )
        case "store":
            // docker login: the daemon signs in with the provider, never with a password docker holds.
            let payload = (try? JSONValue.parse(Data((readLine(strippingNewline: true) ?? "").utf8)))?.objectValue
            let host = payload?["ServerURL"]?.stringValue.flatMap(CredentialHost.fromServerURL)
            let provider = try host.flatMap { try CredentialHosts.provider(for: $0, socket: socket, tool: "docker") }?.provider
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
