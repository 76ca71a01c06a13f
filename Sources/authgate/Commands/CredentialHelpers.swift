import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// Which provider serves which host, as the caller's `providers.list` says, and the calls the
/// helpers make. Everything goes through PlainCall: the helpers run in someone's `git pull` or
/// `docker push`, and the Codable coders' first use would be most of their cost.
enum CredentialHosts {
    /// A provider and its `credential_helper`.
    struct Listing {
        var provider: String
        var helper: ProviderConfiguration.CredentialHelper
    }

    /// The `credential_helper` of every provider the caller may use that has one.
    static func all(socket: String?) throws -> [Listing] {
        guard case .array(let providers) = try PlainCall.result(.providersList, socket: socket) else { return [] }
        func strings(_ value: JSONValue?) -> [String]? {
            guard case .array(let items)? = value else { return nil }
            return items.compactMap(\.stringValue)
        }
        return providers.compactMap(\.objectValue).compactMap { provider in
            guard let id = provider["id"]?.stringValue, let helper = provider["credential_helper"]?.objectValue,
                let username = helper["username"]?.stringValue, let hosts = strings(helper["hosts"])
            else { return nil }
            return Listing(
                provider: id,
                helper: ProviderConfiguration.CredentialHelper(
                    hosts: hosts,
                    username: username,
                    tools: strings(helper["tools"]) ?? ProviderConfiguration.CredentialHelper.allTools,
                    paths: strings(helper["paths"]) ?? [],
                    authType: helper["authtype"]?.stringValue.flatMap(ProviderConfiguration.CredentialHelper.AuthType.init) ?? .basic
                )
            )
        }
    }

    /// The provider that answers for `host` (and `path`) from `tool`, by the daemon's rule
    /// (``CredentialHost/select(host:path:tool:among:)``), and how it was chosen.
    static func provider(for host: String, path: String?, socket: String?, tool: String) throws -> (Listing?, CredentialHost.Selection) {
        let listings = try all(socket: socket)
        let selection = CredentialHost.select(host: host, path: path, tool: tool, among: listings.map(\.helper))
        guard case .helper(let index, _) = selection else { return (nil, selection) }
        return (listings[index], selection)
    }

    /// The session's token, valid at least `minimumValidity` seconds.
    static func token(_ provider: String, session: String?, minimumValidity: Int, socket: String?) throws -> (token: String, tokenType: String, expiresAt: Date)
    {
        var params: [String: JSONValue] = ["min_valid_seconds": .number(Double(minimumValidity)), "provider": .string(provider)]
        if let session { params["session"] = .string(session) }
        return try PlainCall.token(PlainCall.result(.token, params: params, socket: socket))
    }

    /// What a helper answers for a host.
    struct Credential {
        var provider: String
        var username: String
        /// The session the user name chose; `nil`: `default`.
        var session: String?
        /// `bearer` when the provider asks for `Authorization: Bearer`; `nil`: basic.
        var authtype: String?
        var token: (token: String, tokenType: String, expiresAt: Date)
    }

    /// The provider that lists `host` for `tool` (and the `path`, when git sends one) and the
    /// token of its session the `username` names, else of its default session, valid at least
    /// 60 s, in one call (`credential.get`). When the session needs a sign-in, it is run on the
    /// terminal if a person may be there (``PointOfUseSignIn``), else one sentence on stderr
    /// names `authgate login PROVIDER`.
    /// - Parameters:
    ///   - tool: `git` or `docker`: who asks.
    ///   - mayAsk: Whether the tool lets the helper ask (git: `GIT_TERMINAL_PROMPT` is not `0`);
    ///     with the reason to give when it does not.
    /// - Returns: `nil` when no provider lists the host, or nobody could sign in: the caller
    ///   gives its protocol's "no credentials".
    static func credential(
        host: String,
        tool: String,
        socket: String?,
        path: String? = nil,
        username: String? = nil,
        mayAsk: (Bool, why: String) = (true, "")
    ) throws -> Credential? {
        let params = CredentialParams(host: host, tool: tool, minValidSeconds: 60, path: path, username: username)
        guard let result = try PlainCall.result(.credentialGet, params: params.plainParams, socket: socket).objectValue,
            let provider = result["provider"]?.stringValue, let username = result["username"]?.stringValue
        else { return nil }
        let session = result["session"]?.stringValue
        let authtype = result["authtype"]?.stringValue
        if let token = result["token"], case .object = token {
            return Credential(provider: provider, username: username, session: session, authtype: authtype, token: try PlainCall.token(token))
        }
        guard mayAsk.0 else {
            Terminal.writeError("authgate: \(PointOfUseSignIn.sentence(provider: provider, session: session, why: mayAsk.why))\n")
            return nil
        }
        guard try PointOfUseSignIn.run(provider: provider, session: session, socket: socket, tool: tool) else {
            Terminal.writeError("authgate: \(PointOfUseSignIn.sentence(provider: provider, session: session, why: "there is no terminal to run it on"))\n")
            return nil
        }
        return Credential(
            provider: provider,
            username: username,
            session: session,
            authtype: authtype,
            token: try token(provider, session: session, minimumValidity: 60, socket: socket)
        )
    }

    /// Tells the daemon an API refused `accessToken` (`token.rejected`): if it is the current
    /// one, the session is refreshed. Best effort: the helper's caller has failed already.
    /// - Returns: Whether the daemon took it (not: the session does not exist).
    @discardableResult
    static func rejected(_ provider: String, session: String? = nil, accessToken: String, socket: String?) -> Bool {
        var params: [String: JSONValue] = ["access_token": .string(accessToken), "provider": .string(provider)]
        if let session { params["session"] = .string(session) }
        return (try? PlainCall.result(.tokenRejected, params: params, socket: socket)) != nil
    }

    /// Reads `key=value` lines from stdin until a blank line or the end (git's credential protocol).
    static func readAttributes() -> [String: String] {
        var lines: [String] = []
        while lines.count < 1000, let line = readLine(strippingNewline: true), !line.isEmpty { lines.append(line) }
        return CredentialHost.gitAttributes(lines)
    }
}

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
            try GitConfiguration.apply(configure: operation == "configure", host: host, useHttpPath: useHttpPath)
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
                    mayAsk: (mayAsk, "GIT_TERMINAL_PROMPT=0 says not to ask")
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

/// `authgate git-credential configure|unconfigure HOST`: the git config lines
/// docs/INTEGRATIONS.md shows, written and removed with `git config --global` (git run as a
/// child process).
enum GitConfiguration {
    /// The lines for `host`, as `git config` arguments, and what `unconfigure` matches to
    /// remove them: the empty helper (a reset: helpers configured for every host, such as
    /// `cache` or `libsecret`, are not asked for this one, nor told to store its token), then
    /// `authgate`.
    static func apply(configure: Bool, host text: String, useHttpPath: Bool) throws {
        guard let host = CredentialHost.normalize(text) else {
            throw CLIError(
                message: "\(Terminal.safe(text)) is not a host: give host or host:port, without a scheme or path [invalid_params]",
                exitCode: ExitStatus.inputRefused
            )
        }
        let helperKey = "credential.https://\(host).helper"
        let pathKey = "credential.https://\(host).useHttpPath"
        // Removes this helper's lines (an `authgate …` helper and the reset) and nothing else;
        // status 5: there were none.
        try git(["config", "--global", "--unset-all", helperKey, "^(authgate( .*)?|!.* git-credential( .*)?)?$"], allowing: [5])
        if useHttpPath { try git(["config", "--global", "--unset-all", pathKey], allowing: [5]) }
        guard configure else {
            return Terminal.writeError("authgate: removed git's credential lines for https://\(host)\(useHttpPath ? ", and its useHttpPath" : "").\n")
        }
        var lines = [["config", "--global", "--add", helperKey, ""], ["config", "--global", "--add", helperKey, helperLine()]]
        if useHttpPath { lines.append(["config", "--global", pathKey, "true"]) }
        for line in lines {
            try git(line, allowing: [])
            print("git " + line.map { $0.isEmpty ? "''" : $0 }.joined(separator: " "))
        }
    }

    /// The helper as git will find it: `authgate` (git runs `git-credential-authgate`) when that
    /// link is on PATH, else this very program by its absolute path (`!'/path/authgate'
    /// git-credential`, which git runs through the shell), so that the line works wherever the
    /// CLI is installed, links or not.
    static func helperLine(path: String = ProcessEnvironment.value("PATH") ?? "") -> String {
        let linked = path.split(separator: ":").contains { access("\($0)/\(GitCredential.name)", X_OK) == 0 }
        if linked { return "authgate" }
        guard let program = realpath("/proc/self/exe", nil) else { return "authgate" }
        defer { free(program) }
        let quoted = String(cString: program).replacing("'", with: "'\\''")
        return "!'\(quoted)' git-credential"
    }

    /// Runs `git ARGUMENTS` with this process's stdin, stdout and stderr, and waits for it.
    /// - Parameter allowing: Exit statuses other than 0 that are not a failure.
    private static func git(_ arguments: [String], allowing: Set<Int32>) throws {
        let argv: [UnsafeMutablePointer<CChar>?] = (["git"] + arguments).map { strdup($0) } + [nil]
        defer { for item in argv { free(item) } }
        var pid: pid_t = 0
        let failed = posix_spawnp(&pid, "git", nil, nil, argv, environ)
        guard failed == 0 else {
            throw CLIError(
                message: failed == ENOENT
                    ? "git is not installed (no git in PATH): install it, then run this again [git_not_found]"
                    : "cannot run git: \(String(cString: strerror(failed))) [internal_error]",
                exitCode: ExitStatus.internalError
            )
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let code = Supervisor.exitStatus(status)
        guard code == 0 || allowing.contains(code) else {
            throw CLIError(
                message: "git \(arguments.prefix(3).joined(separator: " ")) … failed with status \(code) [internal_error]",
                exitCode: ExitStatus.internalError
            )
        }
    }
}
