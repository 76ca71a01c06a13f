import ArgumentParser
import AuthGateCore
import AuthGateRPC

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a valid access token for a provider.",
        discussion: #"Prints the bare token, for `curl -H "Authorization: Bearer $(authgate token corp)"`."#)

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(name: .customLong("min-valid"), help: ArgumentHelp("The token must stay valid this many seconds (refreshed first otherwise).", valueName: "seconds"))
    var minValid: Int?

    @Flag(name: .customLong("force-refresh"), help: "Refresh the token even if it is still valid.")
    var forceRefresh = false

    @Option(name: .customLong("scope"), help: ArgumentHelp("A narrower scope than the session's (repeat for several); obtained with its refresh token.", valueName: "scope"))
    var scopes: [String] = []

    @Option(help: ArgumentHelp("The API the token is for (RFC 8707), an absolute URI.", valueName: "uri"))
    var resource: String?

    func run() throws {
        let params = TokenParams(provider: selection.provider, session: selection.session, minValidSeconds: minValid,
                                 forceRefresh: forceRefresh ? true : nil, scopes: scopes.isEmpty ? nil : scopes, resource: resource)
        let result = try global.call(.token, params, as: TokenResult.self)
        if global.json { return try global.printJSON(result) }
        print(result.accessToken.exposedValue)
    }
}
