import AuthGateCore
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Where `authgate sink` writes (issue 26 item 9): never through a directory or link another
/// user controls, never a file others may change, and every write and the removal through the
/// directory it opened at start.
@Suite("authgate sink's file", .serialized)
struct SinkTests {
    /// Mock tokens of 3 s, refreshed a second or so before they expire.
    private static let shortMock = #"""
        {"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}],
         "access_token_lifetime_seconds": 3, "refresh": {"before_expiry_seconds": 1}}
        """#

    private static func signIn(_ daemon: DaemonProcess) throws {
        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
    }

    private static func entries(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// Another user, as a root test can make one: a directory or link chowned to nobody.
    private static let otherUID: uid_t = 65534

    @Test("item 9: a root sink refuses a directory another user owns, their link to a root directory (also in a sticky one), and writes nothing there; root's own link and /tmp on the way are fine",
          .enabled(if: getuid() == 0))
    func refusesPlantedDirectories() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try Self.signIn(daemon)
        let scratch = daemon.scratch.path
        let victim = scratch + "/victim"  // root's, like /etc
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: false)
        // shared/ belongs to the other user, who planted app → victim in it.
        let shared = scratch + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        #expect(chown(shared, Self.otherUID, Self.otherUID) == 0)
        try FileManager.default.createSymbolicLink(atPath: shared + "/app", withDestinationPath: victim)
        #expect(lchown(shared + "/app", Self.otherUID, Self.otherUID) == 0)
        let planted = try daemon.cli(["sink", "mock", "--file", shared + "/app/token", "--once"])
        #expect(planted.status == 64, "\(planted)")
        #expect(planted.stderr.contains("the directory \(shared) above the token file \(shared)/app/token is owned by uid 65534"), "\(planted.stderr)")

        // A sticky, root-owned directory like /tmp: the other user's link in it is not followed,
        // and their directory in it is not written into.
        let sticky = scratch + "/sticky"
        try FileManager.default.createDirectory(atPath: sticky, withIntermediateDirectories: false)
        #expect(chmod(sticky, 0o1777) == 0)
        try FileManager.default.createSymbolicLink(atPath: sticky + "/app", withDestinationPath: victim)
        #expect(lchown(sticky + "/app", Self.otherUID, Self.otherUID) == 0)
        let link = try daemon.cli(["sink", "mock", "--file", sticky + "/app/token", "--once"])
        #expect(link.status == 64 && link.stderr.contains("the symbolic link \(sticky)/app above the token file \(sticky)/app/token is owned by uid 65534"),
                "\(link)")
        let theirs = sticky + "/theirs"
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
        #expect(chown(theirs, Self.otherUID, Self.otherUID) == 0)
        let inside = try daemon.cli(["sink", "mock", "--file", theirs + "/token", "--once"])
        #expect(inside.status == 64 && inside.stderr.contains("the directory \(theirs) above the token file"), "\(inside)")
        #expect(Self.entries(victim).isEmpty && Self.entries(theirs).isEmpty, "nothing written: \(Self.entries(victim)) \(Self.entries(theirs))")

        // Root's own link, in root's directory under /tmp (sticky, root's): followed.
        try FileManager.default.createSymbolicLink(atPath: scratch + "/mine", withDestinationPath: "victim")
        let mine = try daemon.cli(["sink", "mock", "--file", scratch + "/mine/token", "--once"])
        #expect(mine.status == 0, "\(mine)")
        #expect(Self.entries(victim) == ["token"])
    }

    @Test("item 9: --mode with a group or other write bit is a usage error and writes nothing; other-readable works with a warning")
    func modes() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try Self.signIn(daemon)
        let file = daemon.scratch.path + "/token"
        for (mode, who) in [("0666", "every user"), ("0602", "every user"), ("0660", "the file's group")] {
            let refused = try daemon.cli(["sink", "mock", "--file", file, "--mode", mode, "--once"])
            #expect(refused.status == 64 && refused.stderr.contains("--mode \(mode) lets \(who) change the token file"), "\(refused)")
            #expect(!FileManager.default.fileExists(atPath: file))
        }
        let readable = try daemon.cli(["sink", "mock", "--file", file, "--mode", "0644", "--once"])
        #expect(readable.status == 0 && readable.stderr.contains("warning: --mode 0644 lets every local user read the token"), "\(readable)")
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o644)
        // A relative path, walked from the working directory.
        let relative = Process()
        relative.executableURL = BuiltProducts.cli
        relative.arguments = ["sink", "mock", "--file", "relative", "--mode", "0440", "--once"]
        relative.environment = ["AUTHGATE_SOCKET": daemon.socketPath]
        relative.currentDirectoryURL = URL(fileURLWithPath: daemon.scratch.path)
        let quiet = Pipe()
        relative.standardError = quiet
        try relative.run()
        let warnings = String(decoding: quiet.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        relative.waitUntilExit()
        #expect(relative.terminationStatus == 0 && !warnings.contains("warning"), "\(warnings)")
        #expect(try FileManager.default.attributesOfItem(atPath: daemon.scratch.path + "/relative")[.posixPermissions] as? Int == 0o440)
    }

    @Test("item 9: once started, the sink writes and removes its file in the directory it opened, even after a link is swapped in for it")
    func writesThroughItsDirectory() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.shortMock], logLevel: "info")
        try Self.signIn(daemon)
        let scratch = daemon.scratch.path
        let out = scratch + "/out", moved = scratch + "/moved", elsewhere = scratch + "/elsewhere"
        for directory in [out, elsewhere] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false) }
        try "decoy\n".write(toFile: elsewhere + "/token", atomically: false, encoding: .utf8)
        let sink = Process()
        sink.executableURL = BuiltProducts.cli
        sink.arguments = ["sink", "mock", "--file", out + "/token"]
        sink.environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": "/usr/bin:/bin"]
        sink.standardError = FileHandle.nullDevice
        try sink.run()
        defer {
            kill(sink.processIdentifier, SIGKILL)
            sink.waitUntilExit()
        }
        try eventually { FileManager.default.fileExists(atPath: out + "/token") }
        let first = try String(contentsOfFile: out + "/token", encoding: .utf8)

        // The directory is moved away and a link to another one takes its name.
        #expect(rename(out, moved) == 0)
        try FileManager.default.createSymbolicLink(atPath: out, withDestinationPath: elsewhere)
        try eventually(timeout: .seconds(15)) {
            let now = try String(contentsOfFile: moved + "/token", encoding: .utf8)
            return now != first && now.hasPrefix("mock_at_")
        }
        #expect(Self.entries(elsewhere) == ["token"] && (try? String(contentsOfFile: elsewhere + "/token", encoding: .utf8)) == "decoy\n")

        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        try eventually { !FileManager.default.fileExists(atPath: moved + "/token") }
        #expect(Self.entries(moved).isEmpty, "no temp file left: \(Self.entries(moved))")
        #expect((try? String(contentsOfFile: elsewhere + "/token", encoding: .utf8)) == "decoy\n", "the removal went through the descriptor")
    }

    @Test("item 9: FileTrust.openDirectory walks `..`, `.`, `//` and the caller's links; refuses a path naming no file, a missing directory and a link loop")
    func directoryWalk() throws {
        let scratch = try ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/a/b", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/link", withDestinationPath: "a/b/../b")
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/loop", withDestinationPath: "loop")

        for path in [scratch.path + "/a/b/../b/token", scratch.path + "/link/token", scratch.path + "//a/./b/token"] {
            guard case .success(let directory) = FileTrust.openDirectory(of: path, as: .tokenFile) else {
                Issue.record("\(path) was refused")
                continue
            }
            #expect(directory.path == scratch.path + "/a/b" && directory.name == "token" && directory.canSync, "\(path): \(directory)")
            close(directory.descriptor)
        }
        for (path, sentence) in [(scratch.path + "/a/", "does not name a file"), (scratch.path + "/a/..", "does not name a file"),
                                 (scratch.path + "/a/x/token", "cannot open the directory \(scratch.path)/a/x"),
                                 (scratch.path + "/loop/token", "cannot follow the symbolic link \(scratch.path)/loop")] {
            guard case .failure(let problem) = FileTrust.openDirectory(of: path, as: .tokenFile) else {
                Issue.record("\(path) was accepted")
                continue
            }
            #expect(problem.description.contains(sentence), "\(path): \(problem)")
        }
    }
}
