import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Consent against a program of the same uid that wants it off, and against another uid that
/// wants it slow: through the socket, with a real askpass program and, where the point is another
/// uid, `nobody` as that uid.
@Suite("Consent under attack", .serialized)
struct ConsentUnderAttackTests {
    static let isRootWithSetpriv = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    private static let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    private static let persistentMock = #"{"type": "mock", "storage": "persistent", "users": [{"username": "demo", "password": "demo-password-1"}]}"#

    /// An askpass program that reads its answer from the first word of the file `answer` (`deny`
    /// when there is none), then logs the question (its own pid, the question's uid, program and
    /// `through`) and answers — or, for `wait`, never. Read before the log line: a test that sees
    /// a question logged may change the answer for the next one.
    private struct Askpass {
        let scratch: ScratchDirectory
        var program: String { scratch.path + "/askpass" }
        var log: String { scratch.path + "/asked.log" }

        init(answer: String) throws {
            scratch = try ScratchDirectory()
            chmod(scratch.path, 0o755)
            try scratch.write("answer", answer + "\n")
            try scratch.write(
                "askpass",
                """
                #!/bin/sh
                answer=$(head -n 1 \(scratch.path)/answer)
                printf '%s|%s|%s|%s\\n' "$$" "$AUTHGATE_CONSENT_UID" "$AUTHGATE_CONSENT_EXECUTABLE" "$AUTHGATE_CONSENT_THROUGH" >> \(log)
                [ "$answer" = wait ] && exec sleep 600
                echo "${answer:-deny}"

                """
            )
            chmod(program, 0o755)
        }

        /// The next questions' answer, replaced at once (a question never reads half a file).
        func answer(_ word: String) throws {
            try Data((word + "\n").utf8).write(to: URL(fileURLWithPath: scratch.path + "/answer"), options: .atomic)
        }

        /// The questions so far: (askpass pid, uid, program, through).
        var questions: [[String]] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map {
                $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            }
        }
    }

    @Test("a failed sign-in cannot switch consent off: a wrong password with confirm=false leaves the session asking, and the token is refused")
    func failedSignInKeepsConsent() throws {
        let askpass = try Askpass(answer: "deny")
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], environment: ["AUTHGATE_ASKPASS": askpass.program])
        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin", "--confirm"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        let wrong = try call(
            try daemon.connect(),
            "login",
            ["provider": "mock", "username": "demo", "password": "wrong-password-9", "confirm": false]
        )
        #expect(((wrong["error"] as? [String: Any])?["data"] as? [String: Any])?["reason"] as? String == "invalid_credentials", "\(wrong)")
        let token = try daemon.cli(["token", "mock"])
        #expect(token.status == 8 && token.stderr.contains("[consent_denied]") && token.stdout.isEmpty, "the failed sign-in switched consent off: \(token)")
        #expect(askpass.questions.count == 1, "the askpass program was not asked")
        let listed = try daemon.cli(["consent", "list"])
        #expect(listed.stdout.contains("mock"), "\(listed.stdout)")
    }

    @Test(
        "consent choices live with their sessions: failed sign-ins record none, and a persistent session that asks still asks after a restart with its answers file lost"
    )
    func choicesLiveWithSessions() throws {
        let askpass = try Askpass(answer: "deny")
        var daemon = try DaemonProcess(providers: ["mock.json": Self.persistentMock], environment: ["AUTHGATE_ASKPASS": askpass.program])
        let connection = try daemon.connect()
        // Sign-ins that fail (here for want of a password) with a new session name each.
        for index in 0..<50 {
            let failed = try call(connection, "login", ["provider": "mock", "session": "s\(index)", "username": "demo", "confirm": true])
            #expect(failed["error"] != nil)
        }
        let consentFile = daemon.stateDirectory + "/consent.json"
        let written = (try? String(contentsOfFile: consentFile, encoding: .utf8)) ?? ""
        #expect(!written.contains("s49") && !written.contains("confirm_sessions"), "a failed sign-in recorded a choice: \(written)")
        #expect(try daemon.cli(["consent", "list", "--json"]).stdout.contains(#""sessions":[]"#))

        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin", "--confirm"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        // An answers file over the size read at start-up is moved aside: nothing may be lost by it.
        try Data(repeating: 0x20, count: 9 << 20).write(to: URL(fileURLWithPath: consentFile))
        daemon = try DaemonProcess(providers: ["mock.json": Self.persistentMock], scratch: daemon.scratch, environment: ["AUTHGATE_ASKPASS": askpass.program])
        try daemon.waitForLog("saved sessions restored")
        let token = try daemon.cli(["token", "mock"])
        #expect(token.status == 8 && token.stderr.contains("[consent_denied]"), "the restored session gave its token unasked: \(token)")
        #expect(askpass.questions.count == 1)
    }

    @Test(
        "another uid's questions cannot hold up mine: a hundred of nobody's callers get one question, the rest a sentence at once, and mine reaches the askpass program at once",
        .enabled(if: isRootWithSetpriv, "needs root and setpriv to call as nobody")
    )
    func anotherUIDCannotStarveQuestions() throws {
        let askpass = try Askpass(answer: "wait")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let daemon = try DaemonProcess(
            providers: ["mock.json": confirming],
            arguments: ["--socket-group", "nogroup", "--consent-timeout", "120", "--max-connections", "1000"],
            environment: ["AUTHGATE_ASKPASS": askpass.program]
        )
        chmod(daemon.scratch.path, 0o755)
        try daemon.signIn(prefix: Self.asNobody)
        try daemon.signIn()
        var callers: [Process] = []
        defer {
            for caller in callers where caller.isRunning { kill(caller.processIdentifier, SIGKILL) }
        }
        for _ in 0..<100 {
            let caller = Process()
            caller.executableURL = URL(fileURLWithPath: Self.asNobody[0])
            caller.arguments = Array(Self.asNobody.dropFirst()) + [BuiltProducts.cli.path, "token", "mock", "--socket", daemon.socketPath]
            caller.standardOutput = FileHandle.nullDevice
            caller.standardError = FileHandle.nullDevice
            try caller.run()
            callers.append(caller)
        }
        try eventually(timeout: .seconds(20)) { !askpass.questions.isEmpty }
        // The others are refused at once rather than queued behind the first.
        try eventually(timeout: .seconds(20), "nobody's other callers were not answered") { callers.filter(\.isRunning).count <= 1 }
        #expect(askpass.questions.count == 1 && askpass.questions.first?[1] == "65534", "\(askpass.questions)")

        try askpass.answer("once")
        let started = ContinuousClock.now
        let mine = try daemon.cli(["token", "mock"])
        #expect(mine.status == 0, "\(mine.stderr)")
        #expect(ContinuousClock.now - started < .seconds(10), "my question waited behind nobody's")
        #expect(askpass.questions.count == 2 && askpass.questions.last?[1] == "\(getuid())")
    }

    @Test("a question ends when its caller hangs up: the askpass program is stopped")
    func questionEndsWithItsCaller() throws {
        let askpass = try Askpass(answer: "wait")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let daemon = try DaemonProcess(
            providers: ["mock.json": confirming],
            arguments: ["--consent-timeout", "120"],
            environment: ["AUTHGATE_ASKPASS": askpass.program]
        )
        try daemon.signIn()
        let caller = Process()
        caller.executableURL = BuiltProducts.cli
        caller.arguments = ["token", "mock", "--socket", daemon.socketPath]
        caller.standardOutput = FileHandle.nullDevice
        caller.standardError = FileHandle.nullDevice
        try caller.run()
        try eventually(timeout: .seconds(20)) { !askpass.questions.isEmpty }
        let asking = try #require(Int32(askpass.questions[0][0]))
        #expect(kill(asking, 0) == 0)
        kill(caller.processIdentifier, SIGKILL)
        caller.waitUntilExit()
        try eventually(timeout: .seconds(10), "the question outlived its caller") { kill(asking, 0) != 0 }
        // A new caller is asked anew.
        let again = Process()
        again.executableURL = BuiltProducts.cli
        again.arguments = ["token", "mock", "--socket", daemon.socketPath]
        again.standardOutput = FileHandle.nullDevice
        again.standardError = FileHandle.nullDevice
        try again.run()
        defer { kill(again.processIdentifier, SIGKILL) }
        try eventually(timeout: .seconds(20)) { askpass.questions.count == 2 }
    }

    @Test(
        "the question names the program that ran the CLI, and always covers that script only: another script running the same CLI is asked; an edited script is asked again"
    )
    func alwaysCoversTheProgramNotTheCLI() throws {
        let askpass = try Askpass(answer: "always")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let daemon = try DaemonProcess(providers: ["mock.json": confirming], environment: ["AUTHGATE_ASKPASS": askpass.program])
        try daemon.signIn()
        let cli = BuiltProducts.cli.path
        try askpass.scratch.write("deploy.sh", "#!/bin/sh\n\(cli) token mock --socket \(daemon.socketPath)\n")
        try askpass.scratch.write("evil-postinstall.sh", "#!/bin/sh\n\(cli) token mock --socket \(daemon.socketPath)\n")
        let deploy = askpass.scratch.path + "/deploy.sh"
        let evil = askpass.scratch.path + "/evil-postinstall.sh"
        for script in [deploy, evil] { chmod(script, 0o755) }

        let first = try run(URL(fileURLWithPath: deploy), [])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(askpass.questions.count == 1)
        #expect(askpass.questions.first?[2] == "\(deploy) (run by /usr/bin/dash)", "\(askpass.questions)")
        #expect(askpass.questions.first?[3].contains("token mock") == true, "the question says the CLI asked for it")
        #expect(try run(URL(fileURLWithPath: deploy), []).status == 0)
        #expect(askpass.questions.count == 1, "always: deploy.sh is not asked again")

        try askpass.answer("deny")
        let other = try run(URL(fileURLWithPath: evil), [])
        #expect(other.status == 8 && other.stdout.isEmpty, "another script was covered by deploy.sh's answer: \(other)")
        #expect(askpass.questions.count == 2 && askpass.questions.last?[2].hasPrefix(evil) == true)

        try askpass.scratch.write("deploy.sh", "#!/bin/sh\n\(cli) token mock --socket \(daemon.socketPath) # changed\n")
        let edited = try run(URL(fileURLWithPath: deploy), [])
        #expect(edited.status == 8, "an edited script kept its answer")
        #expect(askpass.questions.count == 3)
    }

    /// Python code that asks the socket (argv[1]) for mock's token once, prints the answer line,
    /// then, when argv[2] is given, becomes that program (execv) with the rest as its arguments.
    private static let askThenExec = """
        import os, socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}\\n')
        print(s.makefile().readline(), flush=True)
        s.close()
        if len(sys.argv) > 2:
            os.execv(sys.argv[2], sys.argv[2:])
        """

    @Test("while it runs ends at execve: a program allowed while it runs that becomes another (authgate's CLI) is asked again")
    func runningEndsAtExec() throws {
        let askpass = try Askpass(answer: "running")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let daemon = try DaemonProcess(providers: ["mock.json": confirming], environment: ["AUTHGATE_ASKPASS": askpass.program])
        try daemon.signIn()
        try askpass.scratch.write("ask.py", Self.askThenExec)
        let cli = BuiltProducts.cli.path
        let python = URL(fileURLWithPath: "/usr/bin/python3")
        // Allowed while it runs, then the same process (pid and start time) runs the CLI.
        let run1 = Process()
        run1.executableURL = python
        run1.arguments = [askpass.scratch.path + "/ask.py", daemon.socketPath, cli, "token", "mock", "--socket", daemon.socketPath]
        let output = Pipe()
        run1.standardOutput = output
        run1.standardError = FileHandle.nullDevice
        try askpass.scratch.write("answer", "running\n")
        try run1.run()
        try eventually(timeout: .seconds(20)) { askpass.questions.count == 1 }
        try askpass.answer("deny")
        run1.waitUntilExit()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        #expect(printed.first?.contains("access_token") == true, "\(printed)")
        #expect(run1.terminationStatus == 8, "the exec'd CLI got the token unasked: \(printed)")
        #expect(askpass.questions.count == 2)
    }

    @Test("always is keyed on the file's content: a file written over the allowed one (the same inode) is asked again")
    func alwaysEndsWhenTheFileChanges() throws {
        let askpass = try Askpass(answer: "always")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let daemon = try DaemonProcess(providers: ["mock.json": confirming], environment: ["AUTHGATE_ASKPASS": askpass.program])
        try daemon.signIn()
        let program = askpass.scratch.path + "/tool"
        #expect(try run(URL(fileURLWithPath: "/bin/cp"), ["-L", "/usr/bin/python3", program]).status == 0)
        let code = Self.askThenExec
        let first = try run(URL(fileURLWithPath: program), ["-c", code, daemon.socketPath])
        #expect(first.stdout.contains("access_token"), "\(first)")
        #expect(try run(URL(fileURLWithPath: program), ["-c", code, daemon.socketPath]).stdout.contains("access_token"))
        #expect(askpass.questions.count == 1 && askpass.questions.first?[2] == program, "\(askpass.questions)")
        var before = stat()
        stat(program, &before)

        // Written over in place, as cp does: the same inode, another program (perl).
        try askpass.answer("deny")
        let copy = try run(URL(fileURLWithPath: "/bin/cp"), ["/usr/bin/perl", program])
        #expect(copy.status == 0, "\(copy.stderr)")
        var after = stat()
        stat(program, &after)
        #expect(before.st_ino == after.st_ino, "the test means the same inode")
        let perl =
            #"use IO::Socket::UNIX; my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die; print $s qq({"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}\n); print scalar <$s>;"#
        let second = try run(URL(fileURLWithPath: program), ["-e", perl, daemon.socketPath])
        #expect(!second.stdout.contains("access_token") && second.stdout.contains("consent_denied"), "the new file got the token unasked: \(second)")
        #expect(askpass.questions.count == 2)
    }

    @Test(
        "a daemon that cannot see other users' processes (ProtectProc=invisible, as the system unit runs it) denies their questions and says why",
        .enabled(if: isRootWithSetpriv && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), "needs root, setpriv and unshare")
    )
    func hiddenProcessesAreDeniedWithTheReason() throws {
        let askpass = try Askpass(answer: "once")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let scratch = try ScratchDirectory()
        chown(scratch.path, 65534, 65534)
        // /proc mounted with hidepid=invisible in a mount namespace of its own: what the unit's
        // ProtectProc=invisible gives a daemon running as nobody.
        let hiddenProc = [
            "/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            #"mount -t proc -o hidepid=invisible proc /proc && exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@""#, "hidden-proc",
        ]
        let daemon = try DaemonProcess(
            providers: ["mock.json": confirming],
            scratch: scratch,
            environment: ["AUTHGATE_ASKPASS": askpass.program],
            launcher: hiddenProc
        )
        try daemon.signIn()
        let token = try daemon.cli(["token", "mock"])
        #expect(token.status == 8 && token.stderr.contains("cannot see other users' processes"), "\(token.stderr)")
        #expect(!token.stderr.contains("it has exited"))
        #expect(askpass.questions.isEmpty)
    }
}
