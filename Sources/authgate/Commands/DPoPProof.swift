import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct DPoPProof: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dpop-proof",
        abstract: "Print a DPoP proof for one request with a DPoP session's token (RFC 9449).",
        discussion: """
            The proof is signed by the daemon with the session's key, which never leaves it; it \\
            covers the method, the URL (without its query) and the session's current access token. \\
            Send it as the `DPoP` header with `Authorization: DPoP TOKEN` (`authgate token --header --url URL` \\
            prints both).
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(help: ArgumentHelp("The request's method.", valueName: "method"))
    var method = "GET"

    @Option(help: ArgumentHelp("The request's URL.", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("The DPoP-Nonce the server sent, when it asked for one.", valueName: "nonce"))
    var nonce: String?

    func run() throws {
        let params = DPoPProofParams(provider: selection.provider, session: selection.session, htm: method.uppercased(), htu: url, nonce: nonce)
        let result = try global.daemon.call(.dpopProof, params, as: DPoPProofResult.self)
        if global.json { return try global.printJSON(result) }
        print(result.proof)
    }
}
