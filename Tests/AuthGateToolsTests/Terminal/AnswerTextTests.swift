import AuthGateCore
import AuthGateRPC
import AuthGateTools
import Testing

/// What `authgate info`, `providers`, `reload`, `rekey` and `userinfo` print (AnswerText); the
/// built CLI prints them in CLITests and CLIOutputTests.
@Suite("The daemon's answers as the commands print them")
struct AnswerTextTests {
    @Test("info: a row per fact without a header; the storage key and the cached answers only when the daemon says them")
    func info() {
        let plain = DaemonInfo(
            version: "1.2.3",
            uptimeSeconds: 42,
            providers: 2,
            sessions: 1,
            configDir: "/etc/authgate/providers.d",
            mode: "user",
            socket: "/run/a.sock"
        )
        let lines = AnswerText.info(plain).split(separator: "\n")
        #expect(lines.count == 7)
        #expect(lines[0].split(separator: " ") == ["version", "1.2.3"])
        #expect(lines[6].split(separator: " ") == ["uptime", "42", "s"])
        var full = plain
        full.storageKey = "secret-service"
        full.cachedTokenAnswers = 9
        let more = AnswerText.info(full).split(separator: "\n")
        #expect(more.count == 9 && more[7].hasSuffix("secret-service") && more[8].hasSuffix(" 9"))
    }

    static func provider(_ id: String, grants: [Grant], registration: Bool = false, reason: String? = nil) -> ProviderInfo {
        ProviderInfo(
            id: id,
            displayName: id.uppercased(),
            type: nil,
            status: reason == nil ? .ready : .unreachable,
            statusReason: reason,
            grants: grants,
            registration: registration,
            storage: nil
        )
    }

    @Test("providers: a sentence when there is none; the sign-in column with register; a blank line before each status reason")
    func providers() {
        #expect(AnswerText.providers([]) == "No providers are configured.")
        let text = AnswerText.providers([
            Self.provider("corp", grants: [.password, .deviceCode], registration: true),
            Self.provider("lab", grants: [.clientCredentials], reason: "connection refused\u{1B}[2J"),
        ])
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0].split(separator: " ") == ["PROVIDER", "TYPE", "STATUS", "SIGN-IN", "NAME"])
        #expect(lines[1].split(separator: " ") == ["corp", "-", "ready", "password,device_code,register", "CORP"])
        #expect(lines[2].split(separator: " ") == ["lab", "-", "unreachable", "client_credentials", "LAB"])
        #expect(lines[3] == "" && lines[4].hasPrefix("lab is unreachable: connection refused") && !text.contains("\u{1B}"))
        #expect(lines.count == 5)
    }

    @Test("reload: a row per provider, then its problems and warnings indented")
    func reloaded() {
        let text = AnswerText.reloaded([
            ProviderReloadReport(id: "corp", file: "corp.json", change: .added, status: .ready, statusReason: nil, problems: [], warnings: ["no openid"]),
            ProviderReloadReport(id: "old", file: "old.json", change: .removed, status: nil, statusReason: nil, problems: ["gone"], warnings: []),
        ])
        let lines = text.split(separator: "\n")
        #expect(lines[0].split(separator: " ") == ["PROVIDER", "CHANGE", "STATUS", "REASON"])
        #expect(lines[1].split(separator: " ") == ["corp", "added", "ready"])
        #expect(lines[2].split(separator: " ") == ["old", "removed", "-"])
        #expect(lines[3] == "  warning: no openid" && lines[4] == "  error: gone" && lines.count == 5)
    }

    @Test("rekey: sessions and files counted with their plurals, where the key is kept, and the files no key opened when there are some")
    func rekeyed() {
        #expect(
            AnswerText.rekeyed(StorageRekeyResult(storageKey: "secret-service", files: 1, sessions: 1, unreadableFiles: 0))
                == "Sealed 1 session in 1 file under a new key, kept in the Secret Service."
        )
        #expect(
            AnswerText.rekeyed(StorageRekeyResult(storageKey: "file", files: 2, sessions: 3, unreadableFiles: 1))
                == "Sealed 3 sessions in 2 files under a new key, kept in the state directory's key file.\n"
                + "1 file no key opens were left as they are (the daemon's log names them)."
        )
    }

    @Test("userinfo: claims by name; whole numbers without .0, others as they are; structured ones point to --json")
    func claims() {
        let text = AnswerText.claims([
            "sub": .string("alice"), "email_verified": .bool(true), "age": .number(42), "ratio": .number(0.5), "big": .number(1e300),
            "groups": .array([.string("a")]), "nickname": .null,
        ])
        let rows = text.split(separator: "\n").map { $0.split(separator: " ", maxSplits: 1).map { $0.trimmingPrefix(while: \.isWhitespace) } }
        #expect(rows.map { String($0[0]) } == ["CLAIM", "age", "big", "email_verified", "groups", "nickname", "ratio", "sub"])
        #expect(rows[1][1] == "42" && rows[2][1] == "1e+300" && rows[3][1] == "true")
        #expect(rows[4][1] == "(structured; see --json)" && rows[5][1] == "null" && rows[6][1] == "0.5" && rows[7][1] == "alice")
    }
}
