import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

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
            let done = try GitConfiguration.apply(configure: operation == "configure", host: host, useHttpPath: useHttpPath)
            print(done.output, terminator: "")
            if let note = done.note { Terminal.writeError("authgate: \(note)\n") }
        default:
            guard host == nil, !useHttpPath else { throw ValidationError("a host and --use-http-path are for configure and unconfigure") }
            try Self.perform(operation, socket: global.socket, verbose: verbose)
        }
    }

    static let name = "git-credential-authgate"

    /// The helper itself; `git-credential-authgate [-verbose] OPERATION` comes here without the
    /// argument parser (its start-up would be most of the call's cost, in someone's `git pull`).
    static func perform(_ operation: String, socket: String?, verbose: Bool = false) throws {
        func say(_ text: @autoclosure () -> String) {
            if verbose { Terminal.writeError("\(name): \(text())\n") }
        }
        if operation == "version" { return print("\(name) (authgate) \(AuthGateVersion.current)") }
        if operation == "configure" || operation == "unconfigure" {
            throw ValidationError("\(operation) needs the host: authgate git-credential \(operation) HOST")
        }
        let attributes = CredentialHosts.readAttributes()
        // HTTPS only: a token sent over http:// (or a protocol git did not name) is a token
        // anyone on the path may read. git asks its other helpers when this one prints nothing.
        guard attributes["protocol"] == "https" else {
            return say("\(operation): nothing for protocol=\(Terminal.safe(attributes["protocol"] ?? "(none)")): tokens go to https only")
        }
        guard let host = attributes["host"].flatMap(CredentialHost.normalize) else {
            return say("\(operation): nothing for host=\(Terminal.safe(attributes["host"] ?? "(none)")): not a host name")
        }
        // git sends the path with credential.useHttpPath, and a user name from the URL or credential.username.
        let path = attributes["path"]
        let username = attributes["username"]
        let place = host + (path.map { " path \(Terminal.safe($0))" } ?? "")
        switch operation {
        case "get":
            // git asks its other helpers, then the user, when this one prints nothing.
            let mayAsk = ProcessEnvironment.value("GIT_TERMINAL_PROMPT") != "0"
            guard
                let credential = try CredentialHosts.credential(
                    host: host,
                    tool: "git",
                    socket: socket,
                    path: path,
                    username: username,
                    mayAsk: (mayAsk, "GIT_TERMINAL_PROMPT=0 says not to ask"),
                    signIn: { provider, session in try PointOfUseSignIn.run(provider: provider, session: session, socket: socket, tool: "git") }
                )
            else {
                if verbose, path == nil, case (_, .pathNeeded)? = try? CredentialHosts.provider(for: host, path: nil, socket: socket, tool: "git") {
                    return say(
                        "get: no token for \(host): only providers with credential_helper.paths list it, and git sent no path: set credential.useHttpPath (authgate git-credential configure \(host) --use-http-path)"
                    )
                }
                return say("get: no token for \(place): no provider you may use lists it for git, or its session needs a sign-in (see above)")
            }
            let offered = attributes["capability[]"]?.split(separator: "\n").contains("authtype") == true
            let bearer = credential.authtype == "bearer" && offered
            say(
                "get: \(place) answered by provider \(Terminal.safe(credential.provider)), session \(Terminal.safe(credential.session ?? "default"))"
                    + (credential.session == nil ? "" : " (the user name git sent)")
                    + (bearer ? ", authtype Bearer" : ", user name \(Terminal.safe(credential.username))")
                    + (credential.authtype == "bearer" && !offered
                        ? " (the provider asks for Bearer, but git offers no capability[]=authtype: git 2.46 or later does)" : "")
                    + ", token valid until \(UTCTimestamp.format(credential.token.expiresAt))"
            )
            let expiry = "password_expiry_utc=\(Int(credential.token.expiresAt.timeIntervalSince1970))"
            if bearer {
                // git-credential(1): the capability first, then the fields that depend on it; git
                // sends `Authorization: Bearer TOKEN`, and username and password are not used.
                print("capability[]=authtype\nauthtype=Bearer\ncredential=\(credential.token.token)\n\(expiry)")
            } else {
                print("username=\(credential.username)\npassword=\(credential.token.token)\n\(expiry)")
            }
        case "erase":
            // The token git tried was refused: if it is still the session's, the session is
            // refreshed, so the next `get` returns a new one.
            guard let refused = attributes["password"] ?? attributes["credential"],
                case (let listing?, _) = try CredentialHosts.provider(for: host, path: path, socket: socket, tool: "git")
            else {
                return say("erase: nothing to do for \(place)")
            }
            // The session the user name chose, if there is one; else the default session.
            let named = username.flatMap { $0 == listing.helper.username || SessionName($0) == nil ? nil : $0 }
            let session = named.flatMap { CredentialHosts.rejected(listing.provider, session: $0, accessToken: refused, socket: socket) ? $0 : nil }
            if session == nil { CredentialHosts.rejected(listing.provider, accessToken: refused, socket: socket) }
            say(
                "erase: told provider \(Terminal.safe(listing.provider)) that \(place) refused the token of session \(Terminal.safe(session ?? "default")) (the session is refreshed if it was current)"
            )
        default:
            say("\(operation): nothing to do (the daemon keeps the session)")  // store
        }
    }
}
