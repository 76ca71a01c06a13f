package import AuthGateRPC
package import FoundationEssentials

/// What `authgate consent list` and `revoke` print: the sessions that ask because of a choice
/// at sign-in, then the remembered answers as a table (or a sentence when there is none); how
/// many answers a revocation forgot.
package enum ConsentText {
    /// `consent list`'s text, ending with a newline; `now` for the answers' ages.
    package static func list(_ result: ConsentListResult, now: Date = Date()) -> String {
        var text = ""
        if !result.sessions.isEmpty {
            text += "Sessions that ask because you chose so at sign-in:\n"
            text += Terminal.table(["PROVIDER", "SESSION"], result.sessions.map { [$0.provider, $0.session] }) + "\n\n"
        }
        guard !result.answers.isEmpty else { return text + "You have no remembered answers: every program is asked.\n" }
        let rows = result.answers.map { answer in
            [
                answer.provider, answer.session, answer.answer == "running" ? "while pid \(answer.pid.map(String.init) ?? "?") runs" : "always",
                Terminal.safe(answer.executable), Terminal.describe(answer.grantedAt, now: now),
            ]
        }
        return text + Terminal.table(["PROVIDER", "SESSION", "ALLOWED", "PROGRAM", "SINCE"], rows) + "\n"
    }

    /// `consent revoke`'s sentence for `revoked` answers forgotten.
    package static func revoked(_ revoked: Int) -> String {
        revoked == 0
            ? "No answer matched; nothing to forget."
            : "Forgot \(revoked) answer\(revoked == 1 ? "" : "s"); those programs will be asked again."
    }
}
