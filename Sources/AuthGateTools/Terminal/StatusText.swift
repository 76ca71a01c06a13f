import AuthGateCore
package import AuthGateRPC

/// What `authgate status` prints for the sessions the daemon listed: a table (with a UID
/// column for an admin's `--all`, a DPoP key column only when a session is bound to a key),
/// then why each session that could not be saved lives in memory only, once per reason; or a
/// sentence when there is none.
package enum StatusText {
    /// - Parameters:
    ///   - provider: The provider asked about, if any.
    ///   - all: Every user's sessions (`--all`).
    /// - Returns: The text, ending with a newline.
    package static func text(_ sessions: [SessionStatus], provider: String?, all: Bool) -> String {
        guard !sessions.isEmpty else {
            if all { return (provider.map { "Nobody has a session with \($0)." } ?? "Nobody has a session.") + "\n" }
            return (provider.map { "You have no session with \($0)." } ?? "You have no sessions.") + "\n"
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
        var text = Terminal.table((all ? ["UID"] : []) + header, rows) + "\n"
        // Why, once per reason: a full disk or an unwritable directory holds for every session of a uid.
        var said: Set<String> = []
        for reason in sessions.compactMap(\.notSaved) where said.insert(reason).inserted {
            text += "\n(not saved): the session could not be saved to disk (\(Terminal.safe(reason))); it lasts until the daemon stops.\n"
        }
        return text
    }
}
