import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The user, scripted as an askpass program (`AUTHGATE_ASKPASS`): each question is one line of
/// its log (the caller's pid and program, `SSH_ASKPASS_PROMPT`, the question's text), and it
/// answers with the next line of its answers file: `empty` (exit 0, nothing printed: ssh-askpass's
/// yes), `fail` (exit 1), `wait` (never answers: the daemon's timeout stops it), or a word it prints.
private struct ScriptedUser {
    let scratch: ScratchDirectory
    var program: String { scratch.path + "/askpass" }
    var log: String { scratch.path + "/asked.log" }
    private var answersFile: String { scratch.path + "/answers" }

    init(_ answers: [String]) throws {
        scratch = try ScratchDirectory()
        try scratch.write("answers", answers.map { $0 + "\n" }.joined())
        try scratch.write(
            "askpass",
            """
            #!/bin/sh
            printf '%s %s %s %s\\n' "$AUTHGATE_CONSENT_PID" "$AUTHGATE_CONSENT_EXECUTABLE" "$SSH_ASKPASS_PROMPT" "$(printf '%s' "$1" | tr '\\n' ' ')" >> \(log)
            answer=$(head -n 1 \(answersFile))
            tail -n +2 \(answersFile) > \(answersFile).next && mv \(answersFile).next \(answersFile)
            case "$answer" in
                fail) exit 1 ;;
                empty) exit 0 ;;
                wait) exec sleep 600 ;;
                *) echo "$answer" ;;
            esac

            """
        )
        chmod(program, 0o755)
    }

    /// The questions asked so far.
    var questions: [String] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}

/// Consent through the socket: the daemon asks a real askpass program, for the CLI's `token`, the
/// git helper's `credential.get` and a `token.watch`, and never answers a session that asks from
/// the cached path.
@Suite("Consent through the socket, with a scripted askpass")
struct ConsentTests {
    private static let confirmingMock =
        #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#

    private func daemon(_ user: ScriptedUser, providers: [String: String], arguments: [String] = []) throws -> DaemonProcess {
        try DaemonProcess(providers: providers, arguments: arguments, logLevel: "info", environment: ["AUTHGATE_ASKPASS": user.program])
    }

    @Test(
        "askpass answers: nothing printed and exit 0 allows once, another exit status denies, always is remembered and listed, revoke asks again; no token in the question or the log"
    )
    func answers() throws {
        let user = try ScriptedUser(["empty", "fail", "always", "deny"])
        let daemon = try daemon(user, providers: ["mock.json": Self.confirmingMock])
        try daemon.signIn()
        let once = try daemon.cli(["token", "mock"])
        #expect(once.status == 0, "\(once.stderr)")
        let token = once.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        // The CLI was run by this test process: the question is about the program that ran it.
        let runner = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let question = try #require(user.questions.first)
        #expect(question.hasPrefix("\(getpid()) \(runner) confirm Allow \(runner) "), "\(question)")
        #expect(question.contains("through: \(BuiltProducts.cli.path) token mock") && question.contains("uid \(getuid())"), "\(question)")

        let refused = try daemon.cli(["token", "mock"])
        #expect(refused.status == 8 && refused.stderr.contains("[consent_denied]") && refused.stdout.isEmpty, "\(refused.stderr)")
        #expect(user.questions.count == 2, "once asks again")

        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(user.questions.count == 3, "always: the same executable is not asked again")
        let listed = try daemon.cli(["consent", "list", "--json"])
        let answers = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])["answers"] as? [[String: Any]]
        #expect(answers?.count == 1 && answers?.first?["answer"] as? String == "always", "\(listed.stdout)")
        #expect(answers?.first?["executable"] as? String == runner)
        let revoked = try daemon.cli(["consent", "revoke", "mock"])
        #expect(revoked.status == 0 && revoked.stdout.contains("Forgot 1 answer"), "\(revoked.stdout)")
        #expect(try daemon.cli(["token", "mock"]).status == 8, "revoked: asked again, and denied")
        #expect(user.questions.count == 4)

        for text in [user.questions.joined(), daemon.logText] {
            #expect(!token.isEmpty && !text.contains(token), "the token leaked")
        }
        #expect(daemon.logText.contains("consent given") && daemon.logText.contains("consent denied"))
    }

    @Test("allow while it runs: one process's connections, and the CLI it runs, are not asked again; another program is")
    func whileRunning() throws {
        let user = try ScriptedUser(["running", "deny"])
        let daemon = try daemon(user, providers: ["mock.json": Self.confirmingMock])
        try daemon.signIn()
        for _ in 0..<3 {
            let answer = try call(try daemon.connect(), "token", ["provider": "mock"])
            #expect(answer.object["access_token"] as? String != nil, "\(answer)")
        }
        #expect(try daemon.cli(["token", "mock"]).status == 0, "the CLI this process runs asks for this process")
        #expect(user.questions.count == 1)
        #expect(user.questions.first?.hasPrefix("\(getpid()) ") == true)
        try user.scratch.write("other.sh", "#!/bin/sh\n\(BuiltProducts.cli.path) token mock --socket \(daemon.socketPath)\n")
        chmod(user.scratch.path + "/other.sh", 0o755)
        #expect(try run(URL(fileURLWithPath: user.scratch.path + "/other.sh"), []).status == 8)
        #expect(user.questions.count == 2)
    }

    @Test(
        "login --confirm on an open provider: the cached path never answers it (each token asks), nor the git helper, a watch, exec or sink; without it nothing asks"
    )
    func chosenSessionSkipsTheCache() throws {
        let user = try ScriptedUser(["empty", "empty", "deny", "deny", "deny", "deny"])
        let provider = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "credential_helper": {"hosts": ["git.example.com"]}}"#
        let daemon = try daemon(user, providers: ["mock.json": provider])
        try daemon.signIn()
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(user.questions.isEmpty, "a session that does not ask is not asked about")

        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin", "--confirm"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(user.questions.count == 2, "each token asked: none came from the published answers")

        let helper = try run(
            BuiltProducts.cli,
            ["git-credential", "get"],
            stdin: "protocol=https\nhost=git.example.com\n\n",
            environment: ["AUTHGATE_SOCKET": daemon.socketPath]
        )
        #expect(!helper.stdout.contains("password="), "the git helper got a token it was denied: \(helper.stdout)")
        #expect(user.questions.count == 3, "\(helper.stderr)")

        let watch = try call(try daemon.connect(), "token.watch", ["provider": "mock"])
        #expect(((watch["error"] as? [String: Any])?["data"] as? [String: Any])?["reason"] as? String == "consent_denied", "\(watch)")
        #expect(user.questions.count == 4)
        let exec = try daemon.cli(["exec", "mock", "--", "/bin/true"])
        #expect(exec.status == 8 && exec.stderr.contains("[consent_denied]"), "\(exec.stderr)")
        let sink = try daemon.cli(["sink", "mock", "--file", user.scratch.path + "/token", "--once"])
        #expect(sink.status == 8 && !FileManager.default.fileExists(atPath: user.scratch.path + "/token"), "\(sink.stderr)")
        #expect(user.questions.count == 6)
        let listed = try daemon.cli(["consent", "list"])
        #expect(listed.stdout.contains("Sessions that ask because you chose so at sign-in"), "\(listed.stdout)")
    }

    @Test("a watch that began before the session asked is ended when it starts asking (login --confirm); watching again asks")
    func watchBeforeConsent() throws {
        let user = try ScriptedUser(["deny"])
        let open = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}]}"#
        let daemon = try daemon(user, providers: ["mock.json": open])
        try daemon.signIn()
        let watch = try daemon.connect()
        let first = try call(watch, "token.watch", ["provider": "mock"])
        #expect(first.object["access_token"] as? String != nil, "\(first)")
        // A watch that went on would be stopped after 30 s, and the test fail.
        let stop = DispatchWorkItem { [interrupter = watch.interrupter] in interrupter.interrupt() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: stop)
        defer { stop.cancel() }
        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin", "--confirm"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        let line = try #require(try watch.receiveLine())
        let notice = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        let params = notice["params"] as? [String: Any] ?? [:]
        #expect(notice["method"] as? String == "session.ended" && params["reason"] as? String == "access_revoked", "\(notice)")
        #expect((params["message"] as? String)?.contains("watch it again to be asked") == true)
        #expect(params["access_token"] == nil && !String(decoding: line, as: UTF8.self).contains("mock_at"), "no token to a watcher never asked")
        #expect(try watch.receiveLine() == nil, "the connection is closed")
        let again = try call(try daemon.connect(), "token.watch", ["provider": "mock"])
        #expect(((again["error"] as? [String: Any])?["data"] as? [String: Any])?["reason"] as? String == "consent_denied", "\(again)")
        #expect(user.questions.count == 1)
    }

    @Test("a reload that sets access.confirm ends the watches never asked at their next token")
    func reloadSetsConfirm() throws {
        let user = try ScriptedUser([])
        let daemon = try daemon(user, providers: ["mock.json": Providers.quicklyRefreshedMock])
        try daemon.signIn()
        let watch = try daemon.connect()
        #expect(try call(watch, "token.watch", ["provider": "mock"]).object["access_token"] != nil)
        let confirming = Providers.quicklyRefreshedMock.replacingOccurrences(of: #""refresh":"#, with: #""access": {"confirm": true}, "refresh":"#)
        try Data(confirming.utf8).write(to: URL(fileURLWithPath: daemon.providersDirectory + "/mock.json"))
        #expect(try daemon.cli(["reload"]).status == 0)
        // The 3 s token is refreshed within seconds: that token is not sent, the watch ends (a
        // watch that went on would be stopped after 30 s, and the test fail).
        let stop = DispatchWorkItem { [interrupter = watch.interrupter] in interrupter.interrupt() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 30, execute: stop)
        var methods: [String] = []
        while let line = try watch.receiveLine() {
            let notice = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] ?? [:]
            methods.append("\(notice["method"] ?? "?"):\((notice["params"] as? [String: Any])?["reason"] ?? "-")")
        }
        stop.cancel()
        // A refresh may have come between the watch's start and the reload: it is a token.changed.
        #expect(methods.last == "session.ended:access_revoked", "\(methods)")
        #expect(user.questions.isEmpty)
    }

    @Test("a question waiting holds up nobody else; unanswered, it denies at --consent-timeout")
    func timeoutDenies() throws {
        let user = try ScriptedUser(["wait"])
        let open = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}]}"#
        let daemon = try daemon(user, providers: ["mock.json": Self.confirmingMock, "open.json": open], arguments: ["--consent-timeout", "3"])
        try daemon.signIn()
        try daemon.signIn("open")
        let waiting = Process()
        waiting.executableURL = BuiltProducts.cli
        waiting.arguments = ["token", "mock"]
        waiting.environment = ["AUTHGATE_SOCKET": daemon.socketPath]
        let errors = Pipe()
        waiting.standardError = errors
        waiting.standardOutput = FileHandle.nullDevice
        let started = ContinuousClock.now
        try waiting.run()
        try eventually { !user.questions.isEmpty }
        let other = try daemon.cli(["token", "open"])
        #expect(other.status == 0 && waiting.isRunning, "another caller was answered while the question waited")
        let status = try waitForExit(waiting, outputs: [], timeout: .seconds(20), "authgate token")
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status == 8 && stderr.contains("did not answer within 3 s"), "\(stderr)")
        #expect(ContinuousClock.now - started >= .seconds(3))
    }
}
