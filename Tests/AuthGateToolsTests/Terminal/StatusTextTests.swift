import AuthGateCore
import AuthGateRPC
import AuthGateTools
import Foundation
import Testing

/// What `authgate status` prints (StatusText); the built CLI prints it in CLIOutputTests.
@Suite("authgate status: the sessions' table")
struct StatusTextTests {
    private func session(_ name: String, uid: UInt32? = nil, jkt: String? = nil, notSaved: String? = nil) -> SessionStatus {
        SessionStatus(
            provider: "corp",
            session: name,
            state: .authenticated,
            expiresAt: nil,
            nextRefreshAt: nil,
            lastError: nil,
            subject: "1",
            displayName: "alice",
            uid: uid,
            refreshOverdueSeconds: name == "slow" ? 12 : nil,
            dpopJKT: jkt,
            notSaved: notSaved
        )
    }

    @Test("no sessions: a sentence, for you or, with --all, for everyone")
    func none() {
        #expect(StatusText.text([], provider: nil, all: false) == "You have no sessions.\n")
        #expect(StatusText.text([], provider: "corp", all: false) == "You have no session with corp.\n")
        #expect(StatusText.text([], provider: "corp", all: true) == "Nobody has a session with corp.\n")
    }

    @Test("a UID column for --all, a DPoP column only when a session is bound, an overdue refresh said so, each reason not to save once")
    func table() {
        let plain = StatusText.text([session("default")], provider: nil, all: false)
        #expect(plain.hasPrefix("PROVIDER") && !plain.contains("UID") && !plain.contains("DPOP KEY"))
        #expect(plain.contains("alice"))

        let full = StatusText.text(
            [session("default", uid: 1000, jkt: "jkt-1", notSaved: "disk full"), session("slow", uid: 1001, notSaved: "disk full")],
            provider: nil,
            all: true
        )
        #expect(full.hasPrefix("UID") && full.contains("DPOP KEY (JKT)") && full.contains("jkt-1") && full.contains("1001"))
        #expect(full.contains("overdue by 12 s (provider slow)") && full.contains("authenticated (not saved)"))
        #expect(full.components(separatedBy: "(not saved): the session could not be saved to disk (disk full)").count == 2)
        #expect(full.hasSuffix("it lasts until the daemon stops.\n"))
    }
}
