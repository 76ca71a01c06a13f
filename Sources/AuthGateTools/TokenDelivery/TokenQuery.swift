import AuthGateCore
package import AuthGateRPC

/// `authgate token`'s calls: the session's token (or one exchanged for it, RFC 8693), its ID
/// token (refreshed first when it expires within 60 s), and the headers of `--header` (with a
/// DPoP proof for a DPoP session, RFC 9449). The command prints what they return.
package struct TokenQuery {
    package var provider: String
    package var session: String?
    package var minValid: Int?
    package var forceRefresh: Bool
    package var scopes: [String]
    package var resource: String?
    /// `--audience` and `--requested-token-type`: either exchanges the token.
    package var audience: String?
    package var requestedTokenType: String?
    package var daemon: DaemonConnection

    package init(
        provider: String,
        session: String?,
        minValid: Int? = nil,
        forceRefresh: Bool = false,
        scopes: [String] = [],
        resource: String? = nil,
        audience: String? = nil,
        requestedTokenType: String? = nil,
        daemon: DaemonConnection
    ) {
        self.provider = provider
        self.session = session
        self.minValid = minValid
        self.forceRefresh = forceRefresh
        self.scopes = scopes
        self.resource = resource
        self.audience = audience
        self.requestedTokenType = requestedTokenType
        self.daemon = daemon
    }

    /// The usage error of `--id-token` with what goes only with the access token (`--header`,
    /// `--audience`, `--requested-token-type`, `--resource`, `--json`); `nil` otherwise.
    package func problem(idToken: Bool, header: Bool, json: Bool) -> String? {
        guard idToken, header || audience != nil || requestedTokenType != nil || resource != nil || json else { return nil }
        return "--id-token prints the session's ID token: it goes without --header, --audience, --requested-token-type, --resource and --json."
    }

    /// Whether the token is exchanged (`token.exchange`) rather than the session's own.
    package var exchanges: Bool { audience != nil || requestedTokenType != nil }

    /// The `token` call's params; `force` refreshes the session first.
    package func tokenParams(force: Bool? = nil) -> TokenParams {
        TokenParams(
            provider: provider,
            session: session,
            minValidSeconds: minValid,
            forceRefresh: (force ?? forceRefresh) ? true : nil,
            scopes: scopes.isEmpty ? nil : scopes,
            resource: resource
        )
    }

    /// The token: exchanged when ``exchanges``, else the session's.
    package func result() throws(ToolFailure) -> TokenResult {
        guard exchanges else { return try daemon.call(.token, tokenParams(), as: TokenResult.self) }
        let params = TokenExchangeParams(
            provider: provider,
            session: session,
            audience: audience,
            resource: resource,
            scopes: scopes.isEmpty ? nil : scopes,
            requestedTokenType: requestedTokenType,
            minValidSeconds: minValid,
            forceRefresh: forceRefresh ? true : nil
        )
        return try daemon.call(.tokenExchange, params, as: TokenResult.self)
    }

    /// The session's ID token (``SessionIDToken/current(in:provider:session:refreshed:accessTokenInstead:now:refresh:)``).
    package func idToken() throws -> String {
        let current = SessionToken(try daemon.call(.token, tokenParams(), as: TokenResult.self))
        return try SessionIDToken.current(
            in: current,
            provider: provider,
            session: session,
            refreshed: forceRefresh,
            accessTokenInstead: "leave out --id-token for the access token"
        ) {
            SessionToken(try daemon.call(.token, tokenParams(force: true), as: TokenResult.self))
        }.token
    }

    /// `authgate token`'s answer by its flags: the ID token (`idToken`); the bare token the
    /// plain way (``DaemonConnection/accessToken(_:)``, as `authgate token PROVIDER`) when
    /// nothing else is asked; the result for `json`; the bare token; or with `header` the
    /// `Authorization` line, then a DPoP session's proof line. Each line goes to `line` as soon
    /// as it is known (the `Authorization` line before the proof is asked for).
    /// - Returns: The result to print as JSON (`json`); `nil` when the lines were given.
    package func answer(idToken: Bool, header: Bool, json: Bool, method: String, url: String?, line: (String) -> Void) throws -> TokenResult? {
        if idToken {
            line(try self.idToken())
            return nil
        }
        if !exchanges, !header, !json {
            line(try daemon.accessToken(tokenParams()))
            return nil
        }
        let result = try result()
        if json { return result }
        guard header else {
            line(result.accessToken.exposedValue)
            return nil
        }
        line(Self.authorizationHeader(result))
        if let proof = try dpopHeader(result, method: method, url: url) { line(proof) }
        return nil
    }

    /// The `Authorization` header line for `result` (the token's own type).
    package static func authorizationHeader(_ result: TokenResult) -> String {
        "Authorization: \(result.tokenType) \(result.accessToken.exposedValue)"
    }

    /// The `DPoP` header line of a DPoP session's `result` for the request `method` `url`;
    /// `nil` for a Bearer token.
    /// - Throws: When the session is a DPoP one and `url` is missing (the proof is for one request).
    package func dpopHeader(_ result: TokenResult, method: String, url: String?) throws(ToolFailure) -> String? {
        guard result.tokenType == "DPoP" else { return nil }
        guard let url else {
            throw ToolFailure(
                "A DPoP session's header needs the request's URL: add --url (and --method unless it is GET).",
                status: ToolFailure.inputRefused
            )
        }
        let params = DPoPProofParams(provider: provider, session: session, htm: method.uppercased(), htu: url, accessToken: result.accessToken)
        return "DPoP: \(try daemon.call(.dpopProof, params, as: DPoPProofResult.self).proof)"
    }
}
