import ArgumentParser
import AuthGateCore
import AuthGateRPC
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The provider whose `credential_helper.hosts` names `host`, among those the caller may use.
enum CredentialHosts {
    static func provider(for host: String, socket: String?) throws -> ProviderInfo? {
        let providers = try Daemon.call(.providersList, EmptyResult(), as: [ProviderInfo].self, socket: socket, json: false)
        return providers.first { $0.credentialHelper?.hosts.contains(host) == true }
    }

    /// Reads `key=value` lines from stdin until a blank line or the end (git's credential protocol).
    static func readAttributes() -> [String: String] {
        CredentialHost.gitAttributes(AnyIterator { readLine(strippingNewline: true) }.prefix(1000))
    }
}

/// `git-credential-authgate get|store|erase` (a link to `authgate`, which dispatches on the
/// name it was run by; also `authgate git-credential …`): git's credential helper protocol.
/// `get` for a host a provider lists answers its user name and the session's token;
/// for any other host it answers nothing, so git asks its other helpers.
struct GitCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "git's credential helper: a token for the hosts a provider's credential_helper lists.",
        discussion: "git config --global credential.https://git.example.com.helper authgate (git runs git-credential-authgate).")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "get, store or erase (git says which).")
    var operation: String

    func run() throws {
        try Self.perform(operation, socket: global.socket)
    }

    /// The helper itself; `git-credential-authgate OPERATION` comes here without the argument
    /// parser (its start-up would be most of the call's cost, in someone's `git pull`).
    static func perform(_ operation: String, socket: String?) throws {
        let attributes = CredentialHosts.readAttributes()
        guard attributes["protocol"] == "https" || attributes["protocol"] == nil,
              let host = attributes["host"].flatMap(CredentialHost.normalize) else { return }
        switch operation {
        case "get":
            // Read with PlainCall: this runs in someone's `git pull`, and the coders would be
            // most of its cost.
            let providers = try PlainCall.result(.providersList, params: "{}", socket: socket)
            guard case .array(let list) = providers,
                  let provider = list.compactMap(\.objectValue).first(where: { entry in
                      guard case .array(let hosts)? = entry["credential_helper"]?.objectValue?["hosts"] else { return false }
                      return hosts.contains(.string(host))
                  }),
                  let id = provider["id"]?.stringValue,
                  let username = provider["credential_helper"]?.objectValue?["username"]?.stringValue else { return }
            let token = try PlainCall.token(PlainCall.result(.token, params: #"{"min_valid_seconds":60,"provider":\#(PlainCall.quoted(id))}"#, socket: socket))
            print("username=\(username)\npassword=\(token.token)\npassword_expiry_utc=\(Int(token.expiresAt.timeIntervalSince1970))")
        case "erase":
            // The password git tried was refused: if it is still the session's token, the
            // session is refreshed, so the next `get` returns a new one.
            guard let password = attributes["password"], let provider = try CredentialHosts.provider(for: host, socket: socket) else { return }
            _ = try? Daemon.call(.tokenRejected, TokenRejectedParams(provider: provider.id, accessToken: Secret(password)),
                                 as: TokenResult.self, socket: socket, json: false)
        default:
            return  // store: the daemon keeps the session; nothing to store
        }
    }
}

/// `docker-credential-authgate get|list|store|erase`: the docker-credential-helpers protocol.
struct DockerCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential",
        abstract: "docker's credential helper: a token for the registries a provider's credential_helper lists.",
        discussion: #"In ~/.docker/config.json: "credHelpers": {"registry.example.com": "authgate"}."#)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "get, list, store or erase (docker says which).")
    var operation: String

    /// What docker matches to tell "no credentials" from a failure.
    static let notFound = "credentials not found in native keychain"

    func run() throws {
        switch operation {
        case "get":
            let serverURL = readLine(strippingNewline: true) ?? ""
            guard let host = CredentialHost.fromServerURL(serverURL),
                  let provider = try CredentialHosts.provider(for: host, socket: global.socket),
                  let helper = provider.credentialHelper else {
                print(Self.notFound)
                throw ExitCode(1)
            }
            let result = try Daemon.call(.token, TokenParams(provider: provider.id, minValidSeconds: 60), as: TokenResult.self,
                                         socket: global.socket, json: false)
            let answer: [String: String] = ["ServerURL": serverURL, "Username": helper.username, "Secret": result.accessToken.exposedValue]
            print(String(decoding: try RPCCoding.makeEncoder().encode(answer), as: UTF8.self))
        case "list":
            let providers = try Daemon.call(.providersList, EmptyResult(), as: [ProviderInfo].self, socket: global.socket, json: false)
            var servers: [String: String] = [:]
            for provider in providers {
                for host in provider.credentialHelper?.hosts ?? [] { servers[host] = provider.credentialHelper?.username }
            }
            print(String(decoding: try RPCCoding.makeEncoder().encode(servers), as: UTF8.self))
        case "erase":
            // docker names only the server: the session's current token is the refused one.
            let serverURL = readLine(strippingNewline: true) ?? ""
            guard let host = CredentialHost.fromServerURL(serverURL),
                  let provider = try CredentialHosts.provider(for: host, socket: global.socket) else { return }
            if let current = try? Daemon.call(.token, TokenParams(provider: provider.id, minValidSeconds: 0), as: TokenResult.self,
                                              socket: global.socket, json: false) {
                _ = try? Daemon.call(.tokenRejected, TokenRejectedParams(provider: provider.id, accessToken: current.accessToken),
                                     as: TokenResult.self, socket: global.socket, json: false)
            }
        default:
            _ = readLine(strippingNewline: true)  // store: accepted and ignored
        }
    }
}
