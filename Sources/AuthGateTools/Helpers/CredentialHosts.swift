package import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// Which provider serves which host, as the caller's `providers.list` says, and the calls the
/// helpers make. `credential.get`, the call of every `git pull` or `docker push`, is a plain
/// call (its answer read without the Codable coders, whose first use would be most of the
/// helper's cost); the rarer ones decode their answers.
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
    package static func all(socket: String?) throws(ToolFailure) -> [Listing] {
        try DaemonConnection(socket: socket).providers().compactMap { provider in
            guard let helper = provider.credentialHelper else { return nil }
            return Listing(
                provider: provider.id,
                helper: ProviderConfiguration.CredentialHelper(
                    hosts: helper.hosts,
                    username: helper.username,
                    tools: helper.tools ?? ProviderConfiguration.CredentialHelper.allTools,
                    paths: helper.paths ?? [],
                    authType: helper.authtype.flatMap(ProviderConfiguration.CredentialHelper.AuthType.init) ?? .basic
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

    /// What a helper answers for a host.
    package struct Credential {
        package var provider: String
        package var username: String
        /// The session the user name chose; `nil`: `default`.
        package var session: String?
        /// `bearer` when the provider asks for `Authorization: Bearer`; `nil`: basic.
        package var authtype: String?
        package var token: SessionToken
    }

    /// The provider that lists `host` for `tool` (and the `path`, when git sends one) and the
    /// token of its session the `username` names, else of its default session, valid at least
    /// 60 s, in one call (`credential.get`, read without the JSON coders: the helpers' plain
    /// call). When the session needs a sign-in, it is run on the terminal if a person may be
    /// there (``PointOfUseSignIn``), else one sentence on stderr names `authgate login PROVIDER`.
    /// - Parameters:
    ///   - tool: `git` or `docker`: who asks.
    ///   - mayAsk: Whether the tool lets the helper ask (git: `GIT_TERMINAL_PROMPT` is not `0`);
    ///     with the reason to give when it does not.
    /// - Returns: `nil` when no provider lists the host, or nobody could sign in: the caller
    ///   gives its protocol's "no credentials".
    package static func credential(
        host: String,
        tool: String,
        socket: String?,
        path: String? = nil,
        username: String? = nil,
        mayAsk: (Bool, why: String) = (true, "")
    ) throws -> Credential? {
        let daemon = DaemonConnection(socket: socket)
        let params = CredentialParams(host: host, tool: tool, minValidSeconds: 60, path: path, username: username)
        guard let result = try daemon.plainResult(.credentialGet, params: params.plainParams).objectValue,
            let provider = result["provider"]?.stringValue, let username = result["username"]?.stringValue
        else { return nil }
        let session = result["session"]?.stringValue
        let authtype = result["authtype"]?.stringValue
        if let token = result["token"], case .object = token {
            return Credential(provider: provider, username: username, session: session, authtype: authtype, token: try SessionToken(plain: token))
        }
        guard mayAsk.0 else {
            Terminal.writeError("authgate: \(signInSentence(provider: provider, session: session, why: mayAsk.why))\n")
            return nil
        }
        guard try PointOfUseSignIn(socket: socket, tool: tool).run(provider: provider, session: session) else {
            Terminal.writeError("authgate: \(signInSentence(provider: provider, session: session, why: "there is no terminal to run it on"))\n")
            return nil
        }
        return Credential(
            provider: provider,
            username: username,
            session: session,
            authtype: authtype,
            token: SessionToken(try daemon.call(.token, TokenParams(provider: provider, session: session, minValidSeconds: 60), as: TokenResult.self))
        )
    }

    /// Tells the daemon an API refused `accessToken` (`token.rejected`): if it is the current
    /// one, the session is refreshed. Best effort: the helper's caller has failed already.
    /// - Returns: Whether the daemon took it (not: the session does not exist).
    @discardableResult
    package static func rejected(_ provider: String, session: String? = nil, accessToken: String, socket: String?) -> Bool {
        let params = TokenRejectedParams(provider: provider, session: session, accessToken: Secret(accessToken))
        return (try? DaemonConnection(socket: socket).call(.tokenRejected, params, as: TokenResult.self)) != nil
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
