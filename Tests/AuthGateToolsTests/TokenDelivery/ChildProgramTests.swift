import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("exec's supervisor and the sink's --on-change runner")
struct ChildProgramTests {
    @Test("a wait status as a shell reports it: the exit code, or 128 + the signal")
    func exitStatus() {
        #expect(Supervisor.exitStatus(0) == 0)
        #expect(Supervisor.exitStatus(3 << 8) == 3)
        #expect(Supervisor.exitStatus(Int32(SIGTERM)) == 128 + SIGTERM)
    }

    @Test("--signal-on-change: a signal by name, with or without SIG and in any case, or by number; nothing else")
    func signalNames() {
        #expect(Supervisor.OnChange.signalNumber("HUP") == SIGHUP)
        #expect(Supervisor.OnChange.signalNumber("sigusr2") == SIGUSR2)
        #expect(Supervisor.OnChange.signalNumber("10") == 10)
        for refused in ["0", "65", "KILLALL", "", "SIG"] { #expect(Supervisor.OnChange.signalNumber(refused) == nil, "\(refused)") }
    }

    @Test("a burst of triggers while the command runs makes one more run, not one per trigger")
    func coalesces() throws {
        let scratch = try ScratchDirectory()
        let log = scratch.path + "/runs"
        let runner = OnChangeRunner(["/bin/sh", "-c", "echo run >> \(log); sleep 0.3"], timeout: 10, label: "test")
        for _ in 0..<5 { runner.trigger() }
        runner.waitUntilIdle()
        let runs = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").count
        #expect(runs == 2, "the first run, and one for the triggers that came while it ran")
    }

    @Test("a command past its timeout is stopped (SIGTERM to its group), and the runner goes on")
    func timeout() throws {
        let scratch = try ScratchDirectory()
        let runner = OnChangeRunner(["/bin/sh", "-c", "sleep 30; touch \(scratch.path)/finished"], timeout: 0.5, label: "test")
        let start = ContinuousClock.now
        runner.trigger()
        runner.waitUntilIdle()
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(!scratch.entries.contains("finished"))
    }
}
