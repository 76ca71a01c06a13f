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
        try Self.printToken(params, socket: global.socket, json: global.json)
    }

    /// Prints the bare access token, or the whole result as JSON. Also `authgate token
    /// PROVIDER`'s fast path, which does not parse arguments (see ``AuthGate/main()``).
    static func printToken(_ params: TokenParams, socket: String?, json: Bool) throws {
        if json {
            return try Daemon.printJSON(Daemon.call(.token, params, as: TokenResult.self, socket: socket, json: json))
        }
        // Only the token is printed, so only the token is decoded: decoding `expires_at` as a
        // date also loaded the local time zone; p50 of the whole process 7.8 → 5.4 ms.
        print(try Daemon.call(.token, params, as: BareToken.self, socket: socket, json: json).accessToken.exposedValue)
    }
}

/// The part of a `token` result that `authgate token` prints.
private struct BareToken: Decodable {
    var accessToken: Secret

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
    }

    init(from decoder: any Decoder) throws {
        accessToken = Secret(try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .accessToken))
    }
}
