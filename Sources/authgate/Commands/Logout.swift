import ArgumentParser
import AuthGateCore
import AuthGateRPC

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sign out: the session is revoked at the provider where possible and forgotten.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The provider's id.")
    var provider: String

    @Option(help: "Name of the session.")
    var session: String?

    func run() throws {
        let result = try global.call(.logout, LogoutParams(provider: provider, session: session), as: LogoutResult.self,
                                     progress: "Signing out of \(provider)…")
        if global.json { return try global.printJSON(result) }
        print(result.removed ? "Signed out of \(provider)." : "You had no session with \(provider); nothing to do.")
    }
}
