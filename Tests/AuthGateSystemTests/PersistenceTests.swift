import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A persistent provider file for the real authorization server.
private func persistentProvider(_ server: LoopbackServer) -> String {
    #"""
    {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate-password", "grants": ["password"],
     "scopes": ["openid", "profile"], "tls": {"ca_file": "\#(server.caFile)"}, "storage": "persistent",
     "endpoints": {"revocation": "\#(server.endpoints["revocation"] ?? "")"}}
    """#
}

private func mode(_ path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? nil
}

private func token(_ daemon: DaemonProcess, _ provider: String, session: String = "default") throws -> ProcessOutput {
    try daemon.cli(["token", provider, "--session", session])
}

/// `"storage": "persistent"` end to end: sealed files, restarts, crashes, damaged files.
@Suite("Persistent sessions", .serialized)
struct PersistenceTests {
    let uid = getuid()

    @Test("a persistent session survives a restart and a kill -9; memory sessions and the disk stay apart")
    func survivesRestarts() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let providers = ["corp.json": persistentProvider(server), "mock.json": Providers.mock]
        var daemon = try DaemonProcess(providers: providers)
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        try daemon.signIn()
        let accessToken = try token(daemon, "corp").stdout
        #expect(!accessToken.isEmpty)

        let state = daemon.stateDirectory
        let file = state + "/sessions/\(uid).sessions"
        #expect(mode(state + "/authgate.key") == 0o600)
        #expect(mode(state + "/sessions") == 0o700)
        #expect(mode(file) == 0o600)
        let sealed = try String(decoding: Data(contentsOf: URL(fileURLWithPath: file)), as: UTF8.self)
        for plain in [accessToken.trimmingCharacters(in: .newlines), "alice", "corp", "refresh_token"] {
            #expect(!sealed.contains(plain), "the file is sealed")
        }

        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("saved sessions restored")
        try daemon.waitForLog("sessions.restored=1", timeout: .seconds(10))
        #expect(try token(daemon, "corp").stdout == accessToken, "the same token, still valid, with no sign-in")
        #expect(try token(daemon, "mock").status == 3, "memory sessions end with the daemon")

        daemon.send(SIGKILL)
        _ = try daemon.waitForExit()
        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("saved sessions restored")
        #expect(try token(daemon, "corp").stdout == accessToken, "a kill -9 loses nothing")
        let status = try daemon.cli(["status", "--json"]).stdout
        #expect(status.contains(#""state":"authenticated""#))

        #expect(try daemon.cli(["logout", "corp"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: file), "logout deletes from disk")
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("saved sessions restored")
        #expect(try token(daemon, "corp").status == 3)
        for secret in ["alice-password-1", accessToken.trimmingCharacters(in: .newlines)] {
            #expect(!daemon.logText.contains(secret))
        }
    }

    @Test(
        "status names the user as login did (the provider's name, not its subject, which looks like a uid), after a restart too; the uid only in --all"
    )
    func statusNamesTheUser() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let providers = ["lab.json": persistentProvider(server)]
        var daemon = try DaemonProcess(providers: providers)
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "lab", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0 && login.stdout.hasPrefix("Signed in to lab as alice"), "\(login.stdout)\(login.stderr)")
        // The first columns of the session's row: (UID,) PROVIDER, SESSION, STATE, USER.
        func row(all: Bool = false) throws -> [String] {
            let table = try daemon.cli(["status"] + (all ? ["--all"] : [])).stdout
            let line = table.split(separator: "\n").first { $0.contains("lab") } ?? ""
            return line.split(separator: " ").prefix(all ? 5 : 4).map(String.init)
        }
        func namesInJSON() throws -> (subject: String?, displayName: String?) {
            let status = try daemon.cli(["status", "--json"]).stdout
            let sessions = try #require(try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [[String: Any]], "\(status)")
            return (sessions.first?["subject"] as? String, sessions.first?["display_name"] as? String)
        }
        #expect(try row() == ["lab", "default", "authenticated", "alice"])
        let names = try namesInJSON()
        #expect(names.displayName == "alice" && names.subject != nil && names.subject != "alice", "\(names)")
        #expect(try row(all: true) == ["\(uid)", "lab", "default", "authenticated", "alice"])

        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("sessions.restored=1")
        #expect(try row() == ["lab", "default", "authenticated", "alice"], "the name is saved with the session")
    }

    @Test(
        "a persistent sign-in on a full disk keeps the session in memory and the old file intact, and says so: at sign-in and in status until a save succeeds",
        .enabled(if: getuid() == 0, "mounts a tiny tmpfs as the state directory")
    )
    func fullDiskIsSaid() throws {
        let scratch = try ScratchDirectory()
        let state = scratch.path + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let sh = URL(fileURLWithPath: "/bin/sh")
        #expect(try run(sh, ["-c", "mount -t tmpfs -o size=64k,mode=0700 tmpfs \"$1\"", "sh", state]).status == 0)
        defer { _ = try? run(sh, ["-c", "umount -l \"$1\"", "sh", state]) }
        let persistent = #"{"type": "mock", "storage": "persistent", "users": [{"username": "demo", "password": "demo-password-1"}]}"#
        let daemon = try DaemonProcess(providers: ["mock.json": persistent], scratch: scratch)
        defer {
            daemon.send(SIGTERM)
            _ = try? daemon.waitForExit()
        }
        func login() throws -> ProcessOutput { try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n") }
        let saved = try login()
        #expect(saved.status == 0 && saved.stderr.isEmpty, "\(saved.stderr)")
        let file = state + "/sessions/\(uid).sessions"
        let before = try Data(contentsOf: URL(fileURLWithPath: file))

        // Fill the file system: the next save cannot write its temporary file.
        #expect(try run(sh, ["-c", "cat /dev/zero > \"$1\"", "sh", state + "/filler"]).status != 0)
        let full = try login()
        #expect(full.status == 0 && full.stdout.hasPrefix("Signed in to mock as mock:demo."), "\(full)")
        #expect(full.stderr.hasPrefix("authgate: warning: The session could not be saved to disk ("), "\(full.stderr)")
        #expect(full.stderr.contains("it lasts until the daemon stops, and `authgate status` says so until a save succeeds."))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before, "the old file is intact")
        let json = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin", "--json"], stdin: "demo-password-1\n").stdout
        #expect(json.contains(#""notice":"The session could not be saved"#), "\(json)")
        let status = try daemon.cli(["status"]).stdout
        #expect(status.contains("authenticated (not saved)") && status.contains("\n(not saved): the session could not be saved to disk ("), "\(status)")
        #expect(try daemon.cli(["status", "--json"]).stdout.contains(#""not_saved":"#))
        #expect(try daemon.cli(["token", "mock"]).status == 0, "the session works from memory")

        // Room again: the next save succeeds, and status no longer says it.
        try FileManager.default.removeItem(atPath: state + "/filler")
        let again = try login()
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
        let after = try daemon.cli(["status"]).stdout
        #expect(!after.contains("not saved"), "\(after)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) != before, "saved now")
    }

    @Test(
        "a persistent provider's file broken across a restart signs nobody out: its saved session stays on disk, unused, and comes back when the file is fixed and reloaded"
    )
    func brokenFileKeepsSavedSessions() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        var daemon = try DaemonProcess(providers: ["corp.json": persistentProvider(server)])
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let accessToken = try token(daemon, "corp").stdout
        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)

        // A typo made while it was down.
        daemon = try DaemonProcess(providers: ["corp.json": #"{"type": "oidc", "issuer": "#], scratch: daemon.scratch)
        try daemon.waitForLog("saved session kept on disk, unused")
        #expect(try token(daemon, "corp").status != 0)
        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        daemon = try DaemonProcess(providers: ["corp.json": #"{"type": "oidc", "issuer": "#], scratch: daemon.scratch)
        try daemon.waitForLog("saved session kept on disk, unused")

        try persistentProvider(server).write(toFile: daemon.providersDirectory + "/corp.json", atomically: true, encoding: .utf8)
        #expect(try daemon.cli(["reload"]).status == 0)
        #expect(try token(daemon, "corp").stdout == accessToken, "the same session, with no sign-in")
    }

    @Test("only memory providers: the state directory is never touched")
    func memoryOnly() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        try daemon.signIn()
        #expect(try token(daemon, "mock").status == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.stateDirectory))
    }

    @Test("a session whose token expired while the daemon was down is refreshed at start, with no caller")
    func expiredWhileDown() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", accessTokenLifetime: 2)
        let providers = ["corp.json": persistentProvider(server)]
        var daemon = try DaemonProcess(providers: providers)
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let signedIn = try JSONSerialization.jsonObject(with: Data(daemon.cli(["status", "--json"]).stdout.utf8)) as? [[String: Any]]
        let expiresAt = try #require((signedIn?.first?["expires_at"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        // The 2 s token expires while no daemon runs (status gives whole seconds: one more).
        try eventually { Date() > expiresAt.addingTimeInterval(1) }
        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("session refreshed")
        // The refreshed token lives 2 s as well, so a loaded machine may read the status between
        // its expiry and the next refresh: what matters is that the session is served again.
        var status = ""
        try? eventually {
            status = try daemon.cli(["status", "--json"]).stdout
            return status.contains(#""state":"authenticated""#)
        }
        #expect(status.contains(#""state":"authenticated""#), "\(status)")
    }

    @Test("a damaged store file is reported, moved aside, and does not stop the daemon", arguments: ["truncate", "flip", "empty"])
    func damagedFile(damage: String) throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let providers = ["corp.json": persistentProvider(server)]
        var daemon = try DaemonProcess(providers: providers)
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()

        let file = daemon.stateDirectory + "/sessions/\(uid).sessions"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        switch damage {
        case "truncate": bytes.removeLast(bytes.count / 2)
        case "flip": bytes[bytes.count / 2] ^= 0x01
        default: bytes = []
        }
        try Data(bytes).write(to: URL(fileURLWithPath: file))

        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("saved sessions restored")
        try daemon.waitForLog("saved sessions lost", timeout: .seconds(10))
        try daemon.waitForLog("\(uid).sessions.unreadable", timeout: .seconds(10))
        #expect(try token(daemon, "corp").status == 3, "the lost session needs a new sign-in")
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let fresh = try token(daemon, "corp").stdout

        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
        try daemon.waitForLog("saved sessions restored")
        #expect(!daemon.logText.contains("saved sessions lost"))
        #expect(try token(daemon, "corp").stdout == fresh)
    }

    @Test("kill -9 during constant rotation writes never leaves a store that does not open")
    func killDuringWrites() throws {
        let scratch = try ScratchDirectory()
        // 2 s tokens: each of the sessions is refreshed, and its file rewritten, every second or so.
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", accessTokenLifetime: 2)
        let providers = ["corp.json": persistentProvider(server)]
        var daemon = try DaemonProcess(providers: providers)
        for index in 0..<6 {
            let login = try daemon.cli(
                ["login", "corp", "--session", "s\(index)", "--username", "alice", "--password-stdin"],
                stdin: "alice-password-1\n"
            )
            #expect(login.status == 0, "\(login.stderr)")
        }
        var refreshes = 0
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<6 {
            // Each restored daemon must rotate again; the kill then lands at a random moment
            // among the rotation writes (waiting for the first one keeps a loaded machine from
            // killing before any write).
            try daemon.waitForLog("session refreshed", timeout: .seconds(20))
            usleep(UInt32.random(in: 0...1_000_000, using: &generator))
            refreshes += daemon.logText.components(separatedBy: "session refreshed").count - 1
            daemon.send(SIGKILL)
            _ = try daemon.waitForExit()
            daemon = try DaemonProcess(providers: providers, scratch: daemon.scratch)
            try daemon.waitForLog("saved sessions restored")
            #expect(!daemon.logText.contains("saved sessions lost"), "\(daemon.logText)")
        }
        #expect(refreshes >= 6, "the kills landed among rotation writes")
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDirectory + "/sessions").filter { $0.contains("tmp") }
        #expect(leftovers.isEmpty)
    }
}
