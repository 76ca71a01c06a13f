import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Memory-only sessions across a restart of the service, through systemd's file descriptor
/// store, against a stand-in service manager that speaks systemd's protocol
/// (Tests/systemd/fdstore_manager.py: `FDSTORE=1`/`FDNAME=`/`FDSTOREREMOVE=1` on the notify
/// socket, the stored descriptors passed back with `LISTEN_FDS`/`LISTEN_FDNAMES`/`LISTEN_PID`;
/// https://www.freedesktop.org/software/systemd/man/latest/sd_pid_notify_with_fds.html and
/// https://systemd.io/FILE_DESCRIPTOR_STORE/).
@Suite("Memory sessions across a restart (systemd's descriptor store)", .serialized)
struct DescriptorStoreTests {
    /// The stand-in service manager, driven line by line.
    private final class ServiceManager: Sendable {
        let scratch: ScratchDirectory
        let socketPath: String
        let logFile: String
        private let process: Process
        private let input = Pipe()
        private let output = SharedText()

        init(providers: [String: String]) throws {
            scratch = try ScratchDirectory()
            socketPath = scratch.path + "/s.sock"
            logFile = scratch.path + "/daemon.log"
            let providersDirectory = scratch.path + "/providers.d"
            try FileManager.default.createDirectory(atPath: providersDirectory, withIntermediateDirectories: true)
            for (name, json) in providers { try scratch.write("providers.d/" + name, json) }
            process = Process()
            process.executableURL = URL(fileURLWithPath: LoopbackServer.python)
            process.arguments = [
                ServiceTests.systemdScripts.appendingPathComponent("fdstore_manager.py").path, scratch.path + "/notify", logFile, "2",
                BuiltProducts.daemon.path, "--user", "--providers", providersDirectory, "--socket", socketPath, "--state-dir",
                scratch.path + "/state", "--key-store", "file", "--log-level", "info",
            ]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardInput = input
            collect(pipe.fileHandleForReading, into: output)
            try process.run()
        }

        var lines: [String] { output.text.split(separator: "\n").map(String.init) }
        var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

        /// Sends a command and waits for its `ok`; returns the lines it printed.
        @discardableResult
        func command(_ line: String, timeout: Duration = .seconds(30)) throws -> [String] {
            let before = lines.count
            try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
            try eventually(timeout: timeout, "the service manager did not finish '\(line)': \(lines)") {
                lines.dropFirst(before).contains("ok")
            }
            return Array(lines.dropFirst(before))
        }

        /// Starts the daemon and waits until it says READY=1.
        func start() throws {
            let before = lines.count
            try command("start")
            try eventually(timeout: .seconds(30), "the daemon never said READY=1; log:\n\(log)") { lines.dropFirst(before).contains("ready") }
        }

        func cli(_ arguments: [String], stdin: String? = nil) throws -> ProcessOutput {
            try run(BuiltProducts.cli, arguments + ["--socket", socketPath], stdin: stdin)
        }

        deinit {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    private static let mock = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": 600}"#

    private func signIn(_ manager: ServiceManager) throws -> (token: String, nextRefresh: String) {
        let login = try manager.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        let token = try manager.cli(["token", "mock"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.count > 20)
        return (token, try nextRefresh(manager))
    }

    private func nextRefresh(_ manager: ServiceManager) throws -> String {
        let status = try manager.cli(["status", "--json"])
        let sessions = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]] ?? []
        return sessions.first?["next_refresh_at"] as? String ?? "none: \(status.stdout)"
    }

    @Test(
        "a restart keeps memory sessions and their refresh schedules through the descriptor store, and nothing of them reaches the disk; the next start takes them out of the store"
    )
    func restartKeepsMemorySessions() throws {
        let manager = try ServiceManager(providers: ["mock.json": Self.mock])
        try manager.start()
        let (token, nextRefresh) = try signIn(manager)

        let stopped = try manager.command("stop")
        #expect(stopped.contains("stored authgate-sessions") && stopped.contains("stored authgate-sessions-key"), "\(stopped)")
        #expect(stopped.contains("store authgate-sessions,authgate-sessions-key"), "\(stopped)")
        #expect(manager.log.contains("memory sessions handed to systemd's descriptor store"), "\(manager.log)")
        // Nothing on disk: no sessions file, and the token in no file under the state directory.
        let state = manager.scratch.path + "/state"
        let files = FileManager.default.enumerator(atPath: state)?.allObjects as? [String] ?? []
        #expect(!files.contains { $0.hasPrefix("sessions/") }, "\(files)")
        for file in files {
            let contents = (try? Data(contentsOf: URL(fileURLWithPath: state + "/" + file))) ?? Data()
            #expect(!String(decoding: contents, as: UTF8.self).contains(token), "\(file) holds the token")
        }

        let started = manager.lines.count
        try manager.start()
        #expect(try manager.cli(["token", "mock"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == token, "the same token, no sign-in")
        #expect(try self.nextRefresh(manager) == nextRefresh, "the refresh schedule moved")
        try eventually { manager.lines.dropFirst(started).contains("removed authgate-sessions") }
        #expect(manager.lines.dropFirst(started).contains("removed authgate-sessions-key"))
        #expect(manager.log.contains("memory sessions taken back from systemd's descriptor store") && manager.log.contains("sessions.restored=1"))
        #expect(!manager.log.contains(token))
        try manager.command("stop")
    }

    @Test("a stop that is not a restart empties the store: the next start has no memory session")
    func stopEndsMemorySessions() throws {
        let manager = try ServiceManager(providers: ["mock.json": Self.mock])
        try manager.start()
        _ = try signIn(manager)
        try manager.command("stop")
        #expect(try manager.command("flush").contains("store "))
        try manager.start()
        #expect(try manager.cli(["token", "mock"]).status == 3, "a memory session outlived a stop")
        try manager.command("stop")
    }

    @Test("a foreign or damaged descriptor under the store's name is refused with a warning, and the daemon starts clean")
    func foreignDescriptorIsRefused() throws {
        let manager = try ServiceManager(providers: ["mock.json": Self.mock])
        try manager.start()
        _ = try signIn(manager)
        try manager.command("stop")
        try manager.command("foreign authgate-sessions")
        try manager.start()
        #expect(try manager.cli(["token", "mock"]).status == 3)
        #expect(try manager.cli(["providers"]).status == 0, "the daemon serves")
        #expect(manager.log.contains("memory sessions passed by systemd refused; starting without them"), "\(manager.log)")
        #expect(manager.log.contains("not a sealed memfd"), "\(manager.log)")
        try manager.command("stop")
    }
}
