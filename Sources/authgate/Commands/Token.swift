import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a valid access token for a provider.",
        discussion: """
            Prints the bare token; with --header, the whole header for `curl -H @-`, which keeps \
            the token out of every process's argv: `authgate token corp --header | curl -H @- https://api.example.com/`. \
            For a DPoP session (the provider's file sets "dpop": "required"), --header needs the \
            request's --url (and --method, GET by default) and prints the DPoP proof's header too. \
            With --audience or --requested-token-type, the token is exchanged for one (RFC 8693).
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(
        name: .customLong("min-valid"),
        help: ArgumentHelp("The token must stay valid this many seconds (refreshed first otherwise).", valueName: "seconds")
    )
    var minValid: Int?

    @Flag(name: .customLong("force-refresh"), help: "Refresh the token even if it is still valid.")
    var forceRefresh = false

    @Option(
        name: .customLong("scope"),
        help: ArgumentHelp("A narrower scope than the session's (repeat for several); obtained with its refresh token.", valueName: "scope")
    )
    var scopes: [String] = []

    @Option(help: ArgumentHelp("The API the token is for (RFC 8707), an absolute URI.", valueName: "uri"))
    var resource: String?

    @Option(help: ArgumentHelp("Exchange the session's token for one meant for this audience (RFC 8693 token exchange).", valueName: "audience"))
    var audience: String?

    @Option(name: .customLong("requested-token-type"), help: ArgumentHelp("Exchange for a token of this type URI (RFC 8693).", valueName: "uri"))
    var requestedTokenType: String?

    @Flag(help: "Print `Authorization: Bearer TOKEN` (the token's own type), for `curl -H @-`; with a DPoP session, the `DPoP:` proof header too.")
    var header = false

    @Flag(
        name: .customLong("id-token"),
        help: "Print the session's ID token instead, refreshing the session first when it expires within 60 s (as `authgate kubectl`)."
    )
    var idToken = false

    @Option(help: ArgumentHelp("The request's URL, for the DPoP proof of --header.", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("The request's method, for the DPoP proof of --header (default GET).", valueName: "method"))
    var method = "GET"

    func validate() throws {
        if idToken, header || audience != nil || requestedTokenType != nil || resource != nil || global.json {
            throw ValidationError(
                "--id-token prints the session's ID token: it goes without --header, --audience, --requested-token-type, --resource and --json."
            )
        }
    }

    func run() throws {
        if idToken {
            let params = { (force: Bool) in
                TokenParams(
                    provider: selection.provider,
                    session: selection.session,
                    minValidSeconds: minValid,
                    forceRefresh: force ? true : nil,
                    scopes: scopes.isEmpty ? nil : scopes
                )
            }
            let result = try PlainCall.result(.token, params(forceRefresh), socket: global.socket)
            let id = try SessionIDToken.current(
                in: result,
                provider: selection.provider,
                session: selection.session,
                refreshed: forceRefresh,
                accessTokenInstead: "leave out --id-token for the access token"
            ) {
                try PlainCall.result(.token, params(true), socket: global.socket)
            }
            return print(id.token)
        }
        let result: TokenResult
        if audience != nil || requestedTokenType != nil {
            let params = TokenExchangeParams(
                provider: selection.provider,
                session: selection.session,
                audience: audience,
                resource: resource,
                scopes: scopes.isEmpty ? nil : scopes,
                requestedTokenType: requestedTokenType,
                minValidSeconds: minValid,
                forceRefresh: forceRefresh ? true : nil
            )
            result = try global.call(.tokenExchange, params, as: TokenResult.self)
        } else {
            let params = TokenParams(
                provider: selection.provider,
                session: selection.session,
                minValidSeconds: minValid,
                forceRefresh: forceRefresh ? true : nil,
                scopes: scopes.isEmpty ? nil : scopes,
                resource: resource
            )
            guard header, !global.json else { return try Self.printToken(params, socket: global.socket, json: global.json) }
            result = try global.call(.token, params, as: TokenResult.self)
        }
        if global.json { return try global.printJSON(result) }
        guard header else { return print(result.accessToken.exposedValue) }
        print("Authorization: \(result.tokenType) \(result.accessToken.exposedValue)")
        guard result.tokenType == "DPoP" else { return }
        guard let url else {
            throw CLIError(
                message: "A DPoP session's header needs the request's URL: add --url (and --method unless it is GET).",
                exitCode: ExitStatus.inputRefused
            )
        }
        let proof = try global.call(
            .dpopProof,
            DPoPProofParams(
                provider: selection.provider,
                session: selection.session,
                htm: method.uppercased(),
                htu: url,
                accessToken: result.accessToken
            ),
            as: DPoPProofResult.self
        )
        print("DPoP: \(proof.proof)")
    }

    /// Prints the bare access token, or the whole result as JSON. Also `authgate token
    /// PROVIDER`'s fast path, which does not parse arguments (see ``AuthGate/main()``).
    static func printToken(_ params: TokenParams, socket: String?, json: Bool) throws {
        if json {
            return try DaemonConnection.printJSON(DaemonConnection(socket: socket, json: json).call(.token, params, as: TokenResult.self))
        }
        do throws(ToolFailure) {
            print(try PlainCall.accessToken(params, socket: socket))
        } catch {
            throw CLIError(error)
        }
    }
}
