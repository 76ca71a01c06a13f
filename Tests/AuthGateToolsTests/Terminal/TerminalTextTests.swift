import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The CLI's text on a terminal")
struct TerminalTextTests {
    @Test("what the daemon sends is printed with its control characters shown, never run")
    func safe() {
        #expect(Terminal.safe("ok\u{1B}]52;c;aGk=\u{07}\r\nX") == #"ok\u{1B}]52;c;aGk=\u{7}\u{D}\u{A}X"#)
        #expect(Terminal.safe("plain text, ünïcode") == "plain text, ünïcode")
    }

    @Test("a table's columns are aligned on the widest cell, the last one unpadded, every cell made safe")
    func table() {
        let text = Terminal.table(["PROVIDER", "STATE"], [["corp", "authenticated"], ["a-much-longer-id", "login\u{1B}[2J"]])
        #expect(text.split(separator: "\n") == ["PROVIDER          STATE", "corp              authenticated", #"a-much-longer-id  login\u{1B}[2J"#])
    }

    @Test(
        "a sign-out says whether the provider revoked the tokens or they were only forgotten here, and why, the daemon's message made safe",
        arguments: [
            (LogoutResult(removed: true, revocation: RevocationReport(.revoked)), "Signed out of lab: the provider revoked the tokens."),
            (
                LogoutResult(removed: true, revocation: RevocationReport(.notOffered)),
                "Signed out of lab: the tokens were only forgotten here (the provider has no revocation endpoint) and stay valid until they expire."
            ),
            (
                LogoutResult(removed: true, revocation: RevocationReport(.refused(status: 400))),
                "Signed out of lab: the tokens were only forgotten here, as the provider did not revoke them (The provider answered HTTP 400.); they stay valid until they expire."
            ),
            (
                LogoutResult(removed: true, revocation: RevocationReport(status: .failed, message: "lab\u{1B}[2J is unreachable")),
                #"Signed out of lab: the tokens were only forgotten here, as the provider did not revoke them (lab\u{1B}[2J is unreachable); they stay valid until they expire."#
            ),
            (
                LogoutResult(removed: true, revocation: RevocationReport(.unknown)),
                "Signed out of lab: the tokens were forgotten here; the provider does not say whether it revoked them."
            ),
            (LogoutResult(removed: true), "Signed out of lab; the session held no tokens to revoke."),
            (LogoutResult(removed: false), "You had no session with lab; nothing to do."),
        ]
    )
    func signOut(result: LogoutResult, sentence: String) {
        #expect(SignOutSentence.text(result, provider: "lab") == sentence)
    }

    @Test("dates: local time with a rounded distance either way; never for a token without expiry")
    func dates() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(Terminal.describe(now.addingTimeInterval(45), now: now).hasSuffix(" (in 45 s)"))
        #expect(Terminal.describe(now.addingTimeInterval(-150), now: now).hasSuffix(" (3 min ago)"))
        #expect(Terminal.describe(now.addingTimeInterval(5400), now: now).hasSuffix(" (in 2 h)"))
        #expect(Terminal.describe(now.addingTimeInterval(3 * 86_400), now: now).hasSuffix(" (in 3 d)"))
        #expect(Terminal.describe(nil) == "-")
        #expect(Terminal.describe(.distantFuture) == "never")
        #expect(Terminal.validity(.distantFuture) == "valid with no expiry")
        #expect(Terminal.localTime(now).wholeMatch(of: /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/) != nil)
    }
}
