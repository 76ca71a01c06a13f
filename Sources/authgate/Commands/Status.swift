import ArgumentParser
import AuthGateCore
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
        guard !sessions.isEmpty else {
            if all { return print(provider.map { "Nobody has a session with \($0)." } ?? "Nobody has a session.") }
            return print(provider.map { "You have no session with \($0)." } ?? "You have no sessions.")
        }
        // A column only when a session is bound to a key.
        let dpop = sessions.contains { $0.dpopJKT != nil }
        let rows = sessions.map { session in
            // A refresh past its time waits for a slot at a provider slower than its sessions need.
            let nextRefresh = session.refreshOverdueSeconds.map { "overdue by \($0) s (provider slow)" } ?? Terminal.describe(session.nextRefreshAt)
            return (all ? [session.uid.map(String.init) ?? "-"] : [])
                + [
                    // The name the user knows, as `login` said it; the subject (the provider's
                    // identifier, which may look like a uid) only when the provider gave none.
                    session.provider, session.session, session.state.rawValue + (session.notSaved == nil ? "" : " (not saved)"),
                    session.displayName ?? session.subject ?? "-",
                    Terminal.describe(session.expiresAt), nextRefresh, session.lastError ?? "",
                ]
                + (dpop ? [session.dpopJKT ?? "-"] : [])
        }
        let header = ["PROVIDER", "SESSION", "STATE", "USER", "EXPIRES", "NEXT REFRESH", "LAST ERROR"] + (dpop ? ["DPOP KEY (JKT)"] : [])
        print(Terminal.table((all ? ["UID"] : []) + header, rows))
        // Why, once per reason: a full disk or an unwritable directory holds for every session of a uid.
        var said: Set<String> = []
        for reason in sessions.compactMap(\.notSaved) where said.insert(reason).inserted {
            print("\n(not saved): the session could not be saved to disk (\(Terminal.safe(reason))); it lasts until the daemon stops.")
        }
    }
}
