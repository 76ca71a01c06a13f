import AuthGateRPC
import AuthGateTools
import Foundation
import Testing

/// What `authgate consent list` and `revoke` print (ConsentText); the built CLI prints it in
/// ConsentTests.
@Suite("authgate consent: the sessions that ask, the remembered answers, a revocation's count")
struct ConsentTextTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("no chosen sessions and no answers: one sentence")
    func nothing() {
        #expect(ConsentText.list(ConsentListResult(sessions: [], answers: [])) == "You have no remembered answers: every program is asked.\n")
    }

    @Test("the sessions chosen at sign-in come first, then a blank line and the answers: a process's while it runs, a program's always")
    func sessionsAndAnswers() {
        let result = ConsentListResult(
            sessions: [ConsentSession(provider: "corp", session: "default")],
            answers: [
                ConsentEntry(provider: "corp", session: "default", answer: "running", executable: "/usr/bin/curl", pid: 4242, grantedAt: Self.now),
                ConsentEntry(provider: "corp", session: "work", answer: "always", executable: "/usr/bin/git", grantedAt: Self.now),
            ]
        )
        let lines = ConsentText.list(result, now: Self.now).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0] == "Sessions that ask because you chose so at sign-in:")
        #expect(lines[1].hasPrefix("PROVIDER") && lines[2].hasPrefix("corp"))
        #expect(lines[3] == "")
        #expect(lines[4].split(separator: " ", omittingEmptySubsequences: true) == ["PROVIDER", "SESSION", "ALLOWED", "PROGRAM", "SINCE"])
        #expect(lines[5].contains("while pid 4242 runs") && lines[5].contains("/usr/bin/curl"))
        #expect(lines[6].contains("always") && lines[6].contains("/usr/bin/git"))
        #expect(lines.count == 8 && lines[7] == "")
    }

    @Test("a running answer without its pid, and a program path with control characters, are shown safely")
    func unsafeProgram() {
        let result = ConsentListResult(
            sessions: [],
            answers: [ConsentEntry(provider: "corp", session: "default", answer: "running", executable: "/tmp/a\u{1B}[2Jb", grantedAt: Self.now)]
        )
        let text = ConsentText.list(result, now: Self.now)
        #expect(text.hasPrefix("PROVIDER"))
        #expect(text.contains("while pid ? runs"))
        #expect(!text.contains("\u{1B}"))
    }

    @Test("revoke: none matched, one answer, several answers")
    func revoked() {
        #expect(ConsentText.revoked(0) == "No answer matched; nothing to forget.")
        #expect(ConsentText.revoked(1) == "Forgot 1 answer; those programs will be asked again.")
        #expect(ConsentText.revoked(3) == "Forgot 3 answers; those programs will be asked again.")
    }
}
