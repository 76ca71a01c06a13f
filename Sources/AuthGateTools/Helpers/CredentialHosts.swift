package import AuthGateCore
import AuthGateRPC
package import FoundationEssentials

/// Which provider serves which host, as the caller's `providers.list` says, and the calls the
/// helpers make. Everything goes through PlainCall: the helpers run in someone's `git pull` or
/// `docker push`, and the Codable coders' first use would be most of their cost.
package enum CredentialHosts {
    /// A provider and its `credential_helper`.
    package struct Listing {
        package var provider: String
        package var helper: ProviderConfiguration.CredentialHelper

        package init(provider: String, helper: ProviderConfiguration.CredentialHelper) {
            self.provider = provider
            self.helper = helper
        }
    }

    /// The `credential_helper` of every provider the caller may use that has one.
    package static func all(socket: String?) throws -> [Listing] {
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
    package static func provider(for host: String, path: String?, socket: String?, tool: String) throws -> (Listing?, CredentialHost.Selection) {
        let listings = try all(socket: socket)
        let selection = CredentialHost.select(host: host, path: path, tool: tool, among: listings.map(\.helper))
        guard case .helper(let index, _) = selection else { return (nil, selection) }
        return (listings[index], selection)
    }

    /// The session's token, valid at least `minimumValidity` seconds.
    package static func token(
        _ provider: String,
        session: String?,
        minimumValidity: Int,
        socket: String?
    ) throws -> (token: String, tokenType: String, expiresAt: Date) {
        var params: [String: JSONValue] = ["min_valid_seconds": .number(Double(minimumValidity)), "provider": .string(provider)]
        if let session { params["session"] = .string(session) }
        return try PlainCall.token(PlainCall.result(.token, params: params, socket: socket))
    }

    /// What a helper answers for a host.
    package struct Credential {
        package var provider: String
        package var username: String
        /// The session the user name chose; `nil`: `default`.
        package var session: String?
        /// `bearer` when the provider asks for `Authorization: Bearer`; `nil`: basic.
        package var authtype: String?
        package var token: (token: String, tokenType: String, expiresAt: Date)
    }

    /// The provider that lists `host` for `tool` (and the `path`, when git sends one) and the
    /// token of its session the `username` names, else of its default session, valid at least
    /// 60 s, in one call (`credential.get`). When the session needs a sign-in, it is run on the
    /// terminal if a person may be there (`signIn`, the CLI's point-of-use sign-in), else one
    /// sentence on stderr names `authgate login PROVIDER`.
    /// - Parameters:
    ///   - tool: `git` or `docker`: who asks.
    ///   - mayAsk: Whether the tool lets the helper ask (git: `GIT_TERMINAL_PROMPT` is not `0`);
    ///     with the reason to give when it does not.
    ///   - signIn: Runs the provider's sign-in for the session on the user's terminal; false
    ///     when there is no terminal (nothing was run).
    /// - Returns: `nil` when no provider lists the host, or nobody could sign in: the caller
    ///   gives its protocol's "no credentials".
    package static func credential(
        host: String,
        tool: String,
        socket: String?,
        path: String? = nil,
        username: String? = nil,
        mayAsk: (Bool, why: String) = (true, ""),
        signIn: (_ provider: String, _ session: String?) throws -> Bool
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
            Terminal.writeError("authgate: \(signInSentence(provider: provider, session: session, why: mayAsk.why))\n")
            return nil
        }
        guard try signIn(provider, session) else {
            Terminal.writeError("authgate: \(signInSentence(provider: provider, session: session, why: "there is no terminal to run it on"))\n")
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
    package static func rejected(_ provider: String, session: String? = nil, accessToken: String, socket: String?) -> Bool {
        var params: [String: JSONValue] = ["access_token": .string(accessToken), "provider": .string(provider)]
        if let session { params["session"] = .string(session) }
        return (try? PlainCall.result(.tokenRejected, params: params, socket: socket)) != nil
    }

    /// The one sentence on stderr when no person is there to sign in.
    /// - Parameter why: Why the helper cannot sign in here (no terminal, the tool said not to ask).
    package static func signInSentence(provider: String, session: String?, why: String) -> String {
        "sign in first: authgate login \(Terminal.safe(provider))\(session.map { " --session \(Terminal.safe($0))" } ?? "") "
            + "(the session needs a sign-in, and \(why)) [login_required]"
    }

    /// Reads `key=value` lines from stdin until a blank line or the end (git's credential protocol).
    package static func readAttributes() -> [String: String] {
        var lines: [String] = []
        while lines.count < 1000, let line = readLine(strippingNewline: true), !line.isEmpty { lines.append(line) }
        return CredentialHost.gitAttributes(lines)
    }
}
