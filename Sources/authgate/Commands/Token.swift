import ArgumentParser
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

    /// The flags as typed, for TokenQuery to check and to call with.
    private var query: TokenQuery {
        TokenQuery(
            provider: selection.provider,
            session: selection.session,
            minValid: minValid,
            forceRefresh: forceRefresh,
            scopes: scopes,
            resource: resource,
            audience: audience,
            requestedTokenType: requestedTokenType,
            daemon: global.daemon
        )
    }

    func validate() throws {
        if let problem = query.problem(idToken: idToken, header: header, json: global.json) { throw ValidationError(problem) }
    }

    func run() throws {
        if let result = try query.answer(idToken: idToken, header: header, json: global.json, method: method, url: url, line: { print($0) }) {
            try global.printJSON(result)
        }
    }
}
