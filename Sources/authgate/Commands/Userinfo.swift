import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Userinfo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show who you are signed in as: the provider's claims about you.")

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    func run() throws {
        let claims = try global.daemon.call(.userinfo, UserinfoParams(provider: selection.provider, session: selection.session), as: [String: JSONValue].self)
        if global.json { return try global.printJSON(claims) }
        print(AnswerText.claims(claims))
    }
}
