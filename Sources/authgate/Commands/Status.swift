import ArgumentParser
import AuthGateCore
import AuthGateRPC

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show your sessions (never their tokens).")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Only this provider's sessions.")
    var provider: String?

    func run() throws {
        let sessions = try global.call(.status, StatusParams(provider: provider), as: [SessionStatus].self)
        if global.json { return try global.printJSON(sessions) }
        guard !sessions.isEmpty else {
            return print(provider.map { "You have no session with \($0)." } ?? "You have no sessions.")
        }
        let rows = sessions.map { session in
            [session.provider, session.session, session.state.rawValue, session.subject ?? "-",
             Terminal.describe(session.expiresAt), Terminal.describe(session.nextRefreshAt), session.lastError ?? ""]
        }
        print(Terminal.table(["PROVIDER", "SESSION", "STATE", "USER", "EXPIRES", "NEXT REFRESH", "LAST ERROR"], rows))
    }
}
