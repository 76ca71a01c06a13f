import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The daemon as a systemd service: socket activation, readiness notifications, the watchdog,
/// journal priorities, and the process hardening.
@Suite("Running as a service", .serialized)
struct ServiceTests {
    static let systemdScripts = LoopbackServer.repository.appendingPathComponent("Tests/systemd")

    @Test("socket activation: the daemon serves the socket it inherits on fd 3 and leaves it to systemd on exit")
    func socketActivation() throws {
        let scratch = try ScratchDirectory()
        let activate = [LoopbackServer.python, Self.systemdScripts.appendingPathComponent("activate.py").path, scratch.path + "/s.sock"]
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], scratch: scratch, launcher: activate)
        try daemon.waitForLog("listening on the socket systemd passed")
        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(try daemon.cli(["token", "mock"]).stdout.count > 20)
        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        #expect(FileManager.default.fileExists(atPath: daemon.socketPath), "the socket is systemd's: it stays for the next activation")
    }

    @Test(
        "sd_notify on an abstract socket: READY after loading, RELOADING with MONOTONIC_USEC then READY around a reload, WATCHDOG at half WATCHDOG_USEC, STOPPING"
    )
    func notifications() throws {
        let address = "@authgate-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let listener = try NotifyListener(address: address)
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.mock],
            logLevel: "info",
            environment: ["NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"]
        )
        try listener.waitFor { $0.contains("READY=1") }
        try daemon.waitForLog("listening", timeout: .seconds(10))  // READY=1 comes once the socket serves
        // Five pings: four intervals and part of a fifth, ~0.45 s at one every 100 ms (under 1 s
        // with room for a loaded machine; more than one per 67 ms would take under 0.27 s).
        let watchdogStart = listener.messages.count { $0 == "WATCHDOG=1" }
        let counting = ContinuousClock.now
        try listener.waitFor { messages in messages.count { $0 == "WATCHDOG=1" } >= watchdogStart + 5 }
        let fivePings = ContinuousClock.now - counting
        #expect(fivePings >= .milliseconds(270) && fivePings < .seconds(1), "a 200 ms watchdog is petted every 100 ms; 5 pings took \(fivePings)")

        let beforeReload = listener.messages.count
        daemon.send(SIGHUP)
        try listener.waitFor { messages in messages.dropFirst(beforeReload).contains("READY=1") }
        let reload = listener.messages.dropFirst(beforeReload).filter { $0 != "WATCHDOG=1" }
        #expect(reload.count == 2, "\(reload)")
        let reloading = try #require(reload.first)
        #expect(reloading.hasPrefix("RELOADING=1|MONOTONIC_USEC="))
        let monotonic = try #require(UInt64(reloading.split(separator: "=").last ?? ""))
        #expect(monotonic > 0 && monotonic < Self.monotonicMicroseconds(), "MONOTONIC_USEC is CLOCK_MONOTONIC in µs")
        #expect(reload.last == "READY=1")

        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        try listener.waitFor { $0.contains("STOPPING=1") }
    }

    @Test("sd_notify on a path socket; no WATCHDOG when WATCHDOG_PID names another process")
    func notificationsOnPath() throws {
        let scratch = try ScratchDirectory()
        let listener = try NotifyListener(address: scratch.path + "/notify")
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.mock],
            logLevel: "info",
            environment: ["NOTIFY_SOCKET": scratch.path + "/notify", "WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"]
        )
        try listener.waitFor { $0.contains("READY=1") }
        Thread.sleep(forTimeInterval: 0.5)  // on purpose: five watchdog intervals in which none may come
        #expect(!listener.messages.contains("WATCHDOG=1"))
        _ = daemon
    }

    @Test("under the journal, each log line starts with its syslog priority")
    func journalPriorities() throws {
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.mock, "broken.json": Providers.broken],
            logLevel: "info",
            environment: ["JOURNAL_STREAM": "8:12345"]
        )
        let lines = daemon.logText.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("<5>notice authgated: listening") }, "\(daemon.logText)")
        #expect(lines.contains { $0.hasPrefix("<3>error authgated: ") && $0.contains("broken.json") }, "\(daemon.logText)")
        #expect(lines.allSatisfy { $0.range(of: #"^<[0-7]>"#, options: .regularExpression) != nil })
    }

    @Test(
        "not dumpable and no core dumps: /proc/PID belongs to root and the core limit is 0",
        .enabled(
            if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "as root, needs setpriv to run the daemon as another uid"
        )
    )
    func hardening() throws {
        let scratch = try ScratchDirectory()
        var launcher: [String] = []
        if getuid() == 0 {
            // As root the daemon's /proc files belong to root anyway: run it as nobody instead.
            chown(scratch.path, 65534, 65534)
            launcher = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        }
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], scratch: scratch, launcher: launcher)
        let status = try String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8)
        let uid = try #require(status.split(separator: "\n").first { $0.hasPrefix("Uid:") }?.split(separator: "\t").dropFirst().first)
        #expect(uid != "0", "the daemon under test is not root")
        let owner = try FileManager.default.attributesOfItem(atPath: "/proc/\(daemon.pid)/environ")[.ownerAccountID] as? NSNumber
        #expect(owner?.uint32Value == 0, "a non-dumpable process's /proc files belong to root")
        let limits = try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8)
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"], "\(core)")
    }

    @Test(
        "the units pass systemd-analyze verify",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze (Debian's systemd package)")
    )
    func verifyUnits() throws {
        let result = try run(URL(fileURLWithPath: "/bin/bash"), [LoopbackServer.repository.appendingPathComponent("scripts/verify-units").path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
    }

    static func monotonicMicroseconds() -> UInt64 {
        let uptime = (try? String(contentsOfFile: "/proc/uptime", encoding: .utf8))?.split(separator: " ").first.flatMap { Double($0) } ?? 0
        return UInt64(uptime * 1_000_000) + 1_000_000
    }
}

/// A test `$NOTIFY_SOCKET` (Tests/systemd/notify_listen.py): collects the daemon's sd_notify
/// messages, newlines inside one shown as `|`.
final class NotifyListener: Sendable {
    private let process: Process
    private let output = SharedText()
    private let input = Pipe()

    init(address: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: LoopbackServer.python)
        process.arguments = [ServiceTests.systemdScripts.appendingPathComponent("notify_listen.py").path, address]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardInput = input
        collect(pipe.fileHandleForReading, into: output)
        try process.run()
        try waitFor { _ in self.output.text.hasPrefix("bound\n") }
    }

    /// Every message so far, in order.
    var messages: [String] { Array(output.text.split(separator: "\n").dropFirst().map(String.init)) }

    func waitFor(timeout: Duration = .seconds(20), _ condition: ([String]) -> Bool) throws {
        try eventually(timeout: timeout, "no such notification in time; got: \(messages)") { condition(messages) }
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}
