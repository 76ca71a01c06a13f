import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `authgate exec --restart-on-change` / `--signal-on-change`: authgate stays
/// as the command's supervisor, through the real daemon with short-lived mock tokens.
@Suite("authgate exec as a supervisor", .serialized)
struct ExecSupervisorTests {
    private static func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test(
        "--restart-on-change: each refreshed token starts the command again with it in its environment; SIGINT to authgate reaches the command, whose status authgate exits with"
    )
    func restartsWithEachToken() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.quicklyRefreshedMock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let seen = scratch + "/seen"
        let interrupted = scratch + "/interrupted"
        // Records the token it was started with; on SIGINT records that and exits 42.
        let script = #"echo "$AUTHGATE_TOKEN" >> "$0"; trap 'echo INT >> "$1"; exit 42' INT; while :; do sleep 0.1; done"#
        let supervisor = try daemon.backgroundCLI(
            ["exec", "mock", "--min-valid", "0", "--restart-on-change", "--", "/bin/sh", "-c", script, seen, interrupted]
        )
        try eventually(timeout: .seconds(30)) { Set(Self.lines(seen)).count >= 3 }
        let tokens = Self.lines(seen)
        #expect(tokens.allSatisfy { $0.hasPrefix("mock_at_") } && Set(tokens).count == tokens.count, "a new token each start: \(tokens)")
        #expect(supervisor.stderr.contains("restarting the command"))
        // The newest start has the daemon's current token (or the one before, if a refresh is under way).
        try eventually {
            Self.lines(seen).last == (try daemon.cli(["token", "mock", "--min-valid", "0"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }

        kill(supervisor.pid, SIGINT)
        #expect(try supervisor.waitForExit() == 42, "\(supervisor.stderr)")
        #expect(Self.lines(interrupted) == ["INT"])
        #expect(!supervisor.stderr.contains("mock_at_"), "no token on stderr")
    }

    @Test("a stop that comes while a new token restarts the command ends authgate with the command's status: the command is not started again")
    func stopDuringRestart() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.quicklyRefreshedMock], logLevel: "info")
        try daemon.signIn()
        let starts = daemon.scratch.path + "/starts"
        // On SIGTERM (the restart's) it takes a moment to stop, as a command that cleans up does.
        let script = #"echo start >> "$0"; trap 'sleep 1; exit 0' TERM; while :; do sleep 0.1; done"#
        let supervisor = try daemon.backgroundCLI(["exec", "mock", "--min-valid", "0", "--restart-on-change", "--", "/bin/sh", "-c", script, starts])
        try eventually(timeout: .seconds(30), "no restart") { supervisor.stderr.contains("restarting the command") }
        let before = Self.lines(starts).count
        kill(supervisor.pid, SIGTERM)
        #expect(try supervisor.waitForExit(timeout: .seconds(10)) == 0, "\(supervisor.stderr)")
        #expect(Self.lines(starts).count == before, "not started again")
    }

    @Test("--signal-on-change HUP: the command keeps running, gets SIGHUP after each new token is in --token-file and reads it there; SIGTERM passes as 128+15")
    func signalsWithEachToken() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.quicklyRefreshedMock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let tokenFile = scratch + "/token"
        let seen = scratch + "/seen"
        let starts = scratch + "/starts"
        let script = #"echo start >> "$2"; cat "$0" >> "$1"; trap 'cat "$0" >> "$1"' HUP; while :; do sleep 0.1; done"#
        let supervisor = try daemon.backgroundCLI(
            [
                "exec", "mock", "--min-valid", "0", "--signal-on-change", "HUP", "--token-file", tokenFile, "--",
                "/bin/sh", "-c", script, tokenFile, seen, starts,
            ]
        )
        try eventually(timeout: .seconds(30)) { Set(Self.lines(seen)).count >= 3 }
        let tokens = Self.lines(seen)
        #expect(tokens.allSatisfy { $0.hasPrefix("mock_at_") } && Set(tokens).count == tokens.count, "each signal saw a new token: \(tokens)")
        #expect(Self.lines(starts) == ["start"], "started once")
        #expect(try FileManager.default.attributesOfItem(atPath: tokenFile)[.posixPermissions] as? Int == 0o400)

        kill(supervisor.pid, SIGTERM)
        #expect(try supervisor.waitForExit() == 128 + SIGTERM, "\(supervisor.stderr)")
    }

    @Test("--signal-on-change: a new token that cannot be written to --token-file (its directory gone) is not signalled: the command would reread the old one")
    func noSignalWithoutTheFile() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.quicklyRefreshedMock], logLevel: "info")
        try daemon.signIn()
        let directory = daemon.scratch.path + "/tokens"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let tokenFile = directory + "/token"
        let signals = daemon.scratch.path + "/signals"
        let script = #"trap 'echo HUP >> "$0"' HUP; while :; do sleep 0.1; done"#
        let supervisor = try daemon.backgroundCLI(
            ["exec", "mock", "--min-valid", "0", "--signal-on-change", "HUP", "--token-file", tokenFile, "--", "/bin/sh", "-c", script, signals]
        )
        try eventually(timeout: .seconds(30), "no first signal") { Self.lines(signals).count >= 1 }
        try FileManager.default.removeItem(atPath: directory)
        try eventually(timeout: .seconds(30), "no refresh after the directory went") { supervisor.stderr.contains("was not signalled") }
        let signalled = Self.lines(signals).count
        #expect(supervisor.stderr.contains("cannot write the token file"), "\(supervisor.stderr)")
        try eventually(timeout: .seconds(30), "no second failed refresh") { supervisor.stderr.components(separatedBy: "was not signalled").count >= 3 }
        #expect(Self.lines(signals).count == signalled, "no signal for a token the file does not hold")
        kill(supervisor.pid, SIGTERM)
        #expect(try supervisor.waitForExit() == 128 + SIGTERM, "\(supervisor.stderr)")
    }

    @Test("the supervisor passes the command's own exit status on, refuses flags that do not fit, and without the flags exec stays an execvp")
    func statusAndUsage() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let exited = try daemon.cli(["exec", "mock", "--restart-on-change", "--", "/bin/sh", "-c", "exit 7"])
        #expect(exited.status == 7, "\(exited)")
        let killed = try daemon.cli(["exec", "mock", "--restart-on-change", "--", "/bin/sh", "-c", "kill -USR1 $$"])
        #expect(killed.status == 128 + SIGUSR1, "\(killed)")
        // Without the flags: no supervisor process in between (the command is this test's child).
        let plain = try daemon.cli(["exec", "mock", "--", "/bin/sh", "-c", #"echo "$PPID""#])
        #expect(plain.status == 0 && Int32(plain.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == getpid(), "\(plain)")
        let supervised = try daemon.cli(["exec", "mock", "--restart-on-change", "--", "/bin/sh", "-c", #"cat /proc/$PPID/comm"#])
        #expect(supervised.stdout == "authgate\n", "\(supervised)")

        for (arguments, sentence) in [
            (["--restart-on-change", "--signal-on-change", "HUP"], "exclude each other"),
            (["--signal-on-change", "NOPE", "--token-file", "/tmp/x"], "--signal-on-change NOPE is not a signal"),
            (["--signal-on-change", "HUP"], "--signal-on-change needs --token-file"),
            (["--token-file", "/tmp/x"], "--token-file goes with"),
        ] {
            let refused = try daemon.cli(["exec", "mock"] + arguments + ["--", "/bin/true"])
            #expect(refused.status == 64 && refused.stderr.contains(sentence), "\(arguments): \(refused)")
        }
    }

    @Test(
        "on a terminal, Ctrl-C reaches the supervised command once (the terminal's own signal, not passed on again by authgate); a kill(2) to authgate is passed on"
    )
    func terminalInterruptComesOnce() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let record = daemon.scratch.path + "/signals"
        // The command takes its signals with sigwaitinfo, recording who sent each (si_code 128 is
        // the kernel's, a terminal's; 0 a kill(2)). After the first SIGINT it asks authgate to
        // stop it with SIGTERM: authgate reads its signals in number order, so a SIGINT it
        // passes on reaches the command before that SIGTERM does.
        let command = """
            import os, signal, sys
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            print("the command waits for signals", flush=True)
            while True:
                info = signal.sigwaitinfo({signal.SIGINT, signal.SIGTERM})
                with open(sys.argv[1], "a") as out: out.write(f"{info.si_signo} {info.si_code}\\n")
                if info.si_signo == signal.SIGTERM: sys.exit(3)
                os.kill(os.getppid(), signal.SIGTERM)
            """
        let shown = try OnTerminal.run(
            [BuiltProducts.cli.path, "exec", "mock", "--restart-on-change", "--", "/usr/bin/python3", "-c", command, record],
            steps: [.interrupt(after: "the command waits for signals")],
            environment: ["AUTHGATE_SOCKET": daemon.socketPath]
        )
        #expect(shown.done == 1, "\(shown.output)")
        #expect(Self.lines(record) == ["\(SIGINT) 128", "\(SIGTERM) 0"], "Ctrl-C from the terminal once, then authgate's SIGTERM")
        #expect(shown.status == 3, "the command's status: \(shown.output)")
    }

    @Test(
        "exec leading a terminal's session (ssh -t): the terminal's hang-up reaches only exec, which passes it on, and the command ends with it"
    )
    func hangUpPassedOn() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let record = daemon.scratch.path + "/signals"
        let command = """
            import signal, sys
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
            print("the command waits for a hang-up", flush=True)
            info = signal.sigwaitinfo({signal.SIGHUP})
            with open(sys.argv[1], "a") as out: out.write(f"{info.si_signo} {info.si_code}\\n")
            sys.exit(5)
            """
        let shown = try OnTerminal.run(
            [BuiltProducts.cli.path, "exec", "mock", "--restart-on-change", "--", "/usr/bin/python3", "-c", command, record],
            steps: [.hangUp(after: "the command waits for a hang-up")],
            environment: ["AUTHGATE_SOCKET": daemon.socketPath]
        )
        #expect(shown.done == 1, "\(shown.output)")
        #expect(Self.lines(record) == ["\(SIGHUP) 0"], "passed on by exec (a kill, code 0); the terminal showed: \(shown.output)")
        #expect(shown.status == 5, "the command's status; the terminal showed: \(shown.output)")
    }

    @Test("the supervised command gets SIGTERM when authgate is killed with SIGKILL, instead of running on with a token nobody refreshes")
    func commandEndsWithItsSupervisor() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let pidFile = daemon.scratch.path + "/pid"
        let supervisor = try daemon.backgroundCLI(
            ["exec", "mock", "--restart-on-change", "--", "/bin/sh", "-c", #"echo $$ > "$0"; while :; do sleep 0.1; done"#, pidFile]
        )
        try eventually("the command never started") { Self.lines(pidFile).count == 1 }
        let command = try #require(Int32(Self.lines(pidFile)[0]))
        kill(supervisor.pid, SIGKILL)
        _ = try supervisor.waitForExit()
        // Gone, or a zombie its new parent has not reaped yet.
        try eventually("the command outlived its supervisor") {
            guard let stat = try? String(contentsOfFile: "/proc/\(command)/stat", encoding: .utf8) else { return true }
            return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
        }
    }
}
