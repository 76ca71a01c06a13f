import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign out: the session is revoked at the provider where possible and forgotten; says which of the two happened."
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    func run() throws {
        let result = try global.daemon.call(
            .logout,
            LogoutParams(provider: selection.provider, session: selection.session),
            as: LogoutResult.self,
            progress: "Signing out of \(selection.provider)…"
        )
        if global.json { return try global.printJSON(result) }
        print(SignOutSentence.text(result, provider: selection.provider))
    }
}
