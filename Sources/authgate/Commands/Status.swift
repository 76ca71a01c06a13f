import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show your sessions (never their tokens); admins may see everyone's.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Only this provider's sessions.")
    var provider: String?

    @Flag(help: "Every user's sessions, with their uid (root and the admin group only).")
    var all = false

    func run() throws {
        let sessions = try global.daemon.call(.status, StatusParams(provider: provider, all: all ? true : nil), as: [SessionStatus].self)
        if global.json { return try global.printJSON(sessions) }
        print(StatusText.text(sessions, provider: provider, all: all), terminator: "")
    }
}
