import AuthGateCore
import AuthGateTools
import Testing

/// `provider add`'s answers before the file is checked: which flags go together, the questions
/// asked on a terminal for those not given, and the draft they make. The built CLI answers the
/// questions on a pseudo-terminal in ProviderAddQuestionTests.
@Suite("provider add: the answers, the questions for those missing, and the file they make")
struct ProviderFileAnswersTests {
    /// Answers each question with the next of `replies` (`nil` once they run out), keeping the
    /// questions asked.
    final class Asker {
        var replies: [String?]
        var questions: [String] = []

        init(_ replies: [String?]) { self.replies = replies }

        func ask(_ question: String) -> String? {
            questions.append(question)
            return replies.isEmpty ? nil : replies.removeFirst()
        }
    }

    @Test("--initial-access-token-file and --private-key-jwt need --register; --register needs --issuer and refuses --client-id and --client-secret-file")
    func registrationOptions() throws {
        #expect(throws: Never.self) { try ProviderFileAnswers(issuer: "https://idp", clientID: "app").checkRegistration() }
        #expect(throws: Never.self) { try ProviderFileAnswers(issuer: "https://idp", register: true, privateKeyJWT: true).checkRegistration() }
        let refusals: [(ProviderFileAnswers, String)] = [
            (ProviderFileAnswers(privateKeyJWT: true), "--initial-access-token-file and --private-key-jwt go with --register."),
            (ProviderFileAnswers(initialAccessTokenFile: "/t"), "--initial-access-token-file and --private-key-jwt go with --register."),
            (ProviderFileAnswers(register: true), "--register needs --issuer: the registration endpoint is read from its discovery document."),
            (
                ProviderFileAnswers(issuer: "https://idp", clientSecretFile: "/s", register: true),
                "--register obtains the client id (and secret) from the provider: leave out --client-id and --client-secret-file."
            ),
        ]
        for (answers, sentence) in refusals {
            let failure = #expect(throws: ToolFailure.self) { try answers.checkRegistration() }
            #expect(failure?.description == sentence)
            #expect(failure?.showsUsage == true && failure?.status == ToolFailure.usage)
        }
        #expect(ProviderFileAnswers(register: false, privateKeyJWT: false).registration == nil)
        let registration = try #require(
            ProviderFileAnswers(issuer: "https://idp", register: true, initialAccessTokenFile: "/t", privateKeyJWT: true).registration
        )
        #expect(registration.privateKeyJWT && registration.initialAccessTokenFile == "/t")
    }

    @Test("the draft holds the flags: the preset's options by their file names, the grants and storage by their names")
    func draft() throws {
        let answers = ProviderFileAnswers(
            preset: "keycloak",
            host: "sso.example.com",
            realm: "corp",
            clientID: "app",
            grants: ["device_code", "authorization_code"],
            scopes: ["openid", "email"],
            caFile: "/etc/ca.pem",
            deviceEndpoint: "https://sso.example.com/device",
            revocationEndpoint: "https://sso.example.com/revoke",
            credentialHosts: ["git.example.com"],
            storage: "persistent"
        )
        let draft = try answers.draft(schema: "file:///usr/share/doc/authgate/provider.schema.json")
        #expect(draft.schema == "file:///usr/share/doc/authgate/provider.schema.json")
        #expect(draft.preset == .keycloak)
        #expect(draft.presetOptions == ["host": "sso.example.com", "realm": "corp"])
        #expect(draft.clientID == "app")
        #expect(draft.grants == [.deviceCode, .authorizationCode])
        #expect(draft.scopes == ["openid", "email"])
        #expect(draft.caFile == "/etc/ca.pem")
        #expect(draft.deviceEndpoint == "https://sso.example.com/device" && draft.revocationEndpoint == "https://sso.example.com/revoke")
        #expect(draft.credentialHosts == ["git.example.com"])
        #expect(draft.storage == .persistent)
        let plain = try ProviderFileAnswers(issuer: "https://idp", clientSecretFile: "/s").draft(schema: nil)
        #expect(plain.preset == nil && plain.presetOptions.isEmpty && plain.issuer == "https://idp" && plain.clientSecretFile == "/s" && plain.schema == nil)
    }

    @Test("a preset, grant or storage that is not one of its kind is a usage error listing them, the value made safe")
    func unknownNames() {
        let cases: [(ProviderFileAnswers, String)] = [
            (ProviderFileAnswers(preset: "nope"), "--preset must be one of \(ProviderPreset.allCases.map(\.rawValue).joined(separator: ", ")), not \"nope\"."),
            (
                ProviderFileAnswers(grants: ["password", "nope"]),
                "--grant must be one of \(Grant.allCases.map(\.rawValue).joined(separator: ", ")), not \"nope\"."
            ),
            (ProviderFileAnswers(storage: "disk\u{1B}[2J"), "--storage must be one of memory, persistent, not \"\(Terminal.safe("disk\u{1B}[2J"))\"."),
        ]
        for (answers, sentence) in cases {
            let failure = #expect(throws: ToolFailure.self) { try answers.draft(schema: nil) }
            #expect(failure?.description == sentence)
            #expect(failure?.showsUsage == true)
        }
    }

    @Test("on a terminal: a preset's name answers the first question as a preset, storage by its first letter, and a preset asks no grants or scopes")
    func questionsWithAPreset() {
        var answers = ProviderFileAnswers()
        let asker = Asker(["github", "  app-id  ", "Persist"])
        answers.askForMissing(asker.ask)
        #expect(answers.preset == "github" && answers.issuer == nil)
        #expect(answers.clientID == "app-id")
        #expect(answers.storage == "persistent")
        #expect(answers.grants.isEmpty && answers.scopes.isEmpty)
        #expect(asker.questions.count == 3)
        #expect(asker.questions[0] == "Issuer URL, or a preset (\(ProviderPreset.allCases.map(\.rawValue).joined(separator: ", "))): ")
        #expect(asker.questions[1] == "Client id registered at the provider: ")
        #expect(asker.questions[2] == "Sessions in \(ProviderFileAnswers.storageChoices) [memory]: ")
    }

    @Test("on a terminal: an issuer asks grants and scopes, split at spaces; an empty answer or the end of input leaves the field out")
    func questionsWithAnIssuer() {
        var answers = ProviderFileAnswers()
        answers.askForMissing(Asker(["https://idp.example.com", "", "m", "device_code  password", "openid email"]).ask)
        #expect(answers.issuer == "https://idp.example.com" && answers.preset == nil)
        #expect(answers.clientID == nil)
        #expect(answers.storage == "memory")
        #expect(answers.grants == ["device_code", "password"])
        #expect(answers.scopes == ["openid", "email"])
        var ended = ProviderFileAnswers()
        ended.askForMissing(Asker([]).ask)
        #expect(ended == ProviderFileAnswers())
        var typed = ProviderFileAnswers()
        typed.askForMissing(Asker(["https://idp", "app", "sealed"]).ask)
        #expect(typed.storage == "sealed")
    }

    @Test("what was given as a flag is not asked")
    func givenNotAsked() {
        var answers = ProviderFileAnswers(issuer: "https://idp", clientID: "app", grants: ["password"], scopes: ["openid"], storage: "memory")
        let asker = Asker([])
        answers.askForMissing(asker.ask)
        #expect(asker.questions.isEmpty)
    }
}
