import AuthGateCore
import FoundationEssentials

/// git's credential helper protocol (git-credential(1)) as `git-credential-authgate` speaks it:
/// `get` answers with the token of the provider that lists the host for git (as a password, or
/// as a Bearer credential when the provider asks for it and git offers `authtype`), `erase`
/// tells the daemon the token was refused, `store` has nothing to do (the daemon keeps the
/// session). Tokens go to https only: for anything else the helper prints nothing, and git asks
/// its other helpers. The command reads git's attributes and prints; this decides.
package struct GitCredentialHelper {
    package static let name = "git-credential-authgate"

    package var socket: String?
    /// Whether git lets the helper ask the user (`GIT_TERMINAL_PROMPT` is not `0`).
    package var mayAsk: Bool
    /// Told, as a sentence, which provider and session answered or why none did (`-verbose`);
    /// `nil`: quiet (and no call is made only to explain).
    package var report: ((String) -> Void)?

    package init(socket: String?, mayAsk: Bool, report: ((String) -> Void)? = nil) {
        self.socket = socket
        self.mayAsk = mayAsk
        self.report = report
    }

    /// The helper as git runs it: `operation` with the attributes git sends on stdin (none for
    /// `version`), allowed to ask the user unless `GIT_TERMINAL_PROMPT=0`, saying on standard
    /// error what answered when `verbose`. `configure` and `unconfigure` are refused (usage):
    /// they need the host.
    /// - Returns: What to print on stdout.
    package static func run(_ operation: String, socket: String?, verbose: Bool) throws -> String {
        if operation == "configure" || operation == "unconfigure" {
            throw ToolFailure.usageError("\(operation) needs the host: authgate git-credential \(operation) HOST")
        }
        let helper = GitCredentialHelper(
            socket: socket,
            // git asks its other helpers, then the user, when this one prints nothing.
            mayAsk: ProcessEnvironment.value("GIT_TERMINAL_PROMPT") != "0",
            report: verbose ? { Terminal.writeError("\(name): \($0)\n") } : nil
        )
        let attributes = operation == "version" ? [:] : CredentialHosts.readAttributes()
        return try helper.perform(operation, attributes: attributes)
    }

    /// git's `operation` with the attributes git sent: what to print on stdout (empty: nothing,
    /// so git goes on to its other helpers or the user).
    package func perform(_ operation: String, attributes: [String: String]) throws -> String {
        func say(_ text: @autoclosure () -> String) { report?(text()) }
        if operation == "version" { return "\(Self.name) (authgate) \(AuthGateVersion.current)\n" }
        // HTTPS only: a token sent over http:// (or a protocol git did not name) is a token
        // anyone on the path may read.
        guard attributes["protocol"] == "https" else {
            say("\(operation): nothing for protocol=\(Terminal.safe(attributes["protocol"] ?? "(none)")): tokens go to https only")
            return ""
        }
        guard let host = attributes["host"].flatMap(CredentialHost.normalize) else {
            say("\(operation): nothing for host=\(Terminal.safe(attributes["host"] ?? "(none)")): not a host name")
            return ""
        }
        // git sends the path with credential.useHttpPath, and a user name from the URL or credential.username.
        let path = attributes["path"]
        let username = attributes["username"]
        let place = host + (path.map { " path \(Terminal.safe($0))" } ?? "")
        switch operation {
        case "get":
            guard
                let credential = try CredentialHosts.credential(
                    host: host,
                    tool: "git",
                    socket: socket,
                    path: path,
                    username: username,
                    mayAsk: (mayAsk, "GIT_TERMINAL_PROMPT=0 says not to ask")
                )
            else {
                switch report == nil ? nil : try? CredentialHosts.provider(for: host, path: path, socket: socket, tool: "git") {
                case (_, .pathNeeded)? where path == nil:
                    say(
                        "get: no token for \(host): only providers with credential_helper.paths list it, and git sent no path: set credential.useHttpPath (authgate git-credential configure \(host) --use-http-path)"
                    )
                case (let listing?, _)?:
                    // CredentialHosts.credential said on stderr why it could not sign in.
                    say("get: no token for \(place): provider \(Terminal.safe(listing.provider)) lists it, but its session needs a sign-in (see above)")
                default:
                    say("get: no token for \(place): no provider you may use lists it for git (authgate providers --json shows their credential_helper hosts)")
                }
                return ""
            }
            let offered = attributes["capability[]"]?.split(separator: "\n").contains("authtype") == true
            say(
                "get: \(place) answered by provider \(Terminal.safe(credential.provider)), session \(Terminal.safe(credential.session ?? "default"))"
                    + (credential.session == nil ? "" : " (the user name git sent)")
                    + (credential.authtype == "bearer" && offered ? ", authtype Bearer" : ", user name \(Terminal.safe(credential.username))")
                    + (credential.authtype == "bearer" && !offered
                        ? " (the provider asks for Bearer, but git offers no capability[]=authtype: git 2.46 or later does)" : "")
                    + ", token valid until \(UTCTimestamp.format(credential.token.expiresAt))"
            )
            return Self.answer(credential, authtypeOffered: offered)
        case "erase":
            // The token git tried was refused: if it is still the session's, the session is
            // refreshed, so the next `get` returns a new one.
            guard let refused = attributes["password"] ?? attributes["credential"],
                case (let listing?, _) = try CredentialHosts.provider(for: host, path: path, socket: socket, tool: "git")
            else {
                say("erase: nothing to do for \(place)")
                return ""
            }
            // The session the user name chose, if there is one; else the default session.
            let named = username.flatMap { $0 == listing.helper.username || SessionName($0) == nil ? nil : $0 }
            let session = named.flatMap { CredentialHosts.rejected(listing.provider, session: $0, accessToken: refused, socket: socket) ? $0 : nil }
            if session == nil { CredentialHosts.rejected(listing.provider, accessToken: refused, socket: socket) }
            say(
                "erase: told provider \(Terminal.safe(listing.provider)) that \(place) refused the token of session \(Terminal.safe(session ?? "default")) (the session is refreshed if it was current)"
            )
            return ""
        default:
            say("\(operation): nothing to do (the daemon keeps the session)")  // store
            return ""
        }
    }

    /// `get`'s answer for `credential`: a Bearer credential when the provider asks for one and
    /// git offers `authtype` (git-credential(1): the capability first, then the fields that
    /// depend on it; git then sends `Authorization: Bearer TOKEN`), else the token as the
    /// password of the provider's user name; with the token's expiry either way.
    package static func answer(_ credential: CredentialHosts.Credential, authtypeOffered: Bool) -> String {
        let expiry = "password_expiry_utc=\(Int(credential.token.expiresAt.timeIntervalSince1970))"
        if credential.authtype == "bearer" && authtypeOffered {
            return "capability[]=authtype\nauthtype=Bearer\ncredential=\(credential.token.token)\n\(expiry)\n"
        }
        return "username=\(credential.username)\npassword=\(credential.token.token)\n\(expiry)\n"
    }
}
