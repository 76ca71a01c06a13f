import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where `authgate sink` writes: never through a directory or link another
/// user controls, never a file others may change, and every write and the removal through the
/// directory it opened at start.
@Suite("authgate sink's file", .serialized)
struct SinkTests {
    static func entries(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// Another user, as a root test can make one: a directory or link chowned to nobody.
    static let otherUID: uid_t = 65534

    @Test(
        "a root sink refuses a directory another user owns, their link to a root directory (also in a sticky one), and writes nothing there, nor serves a file another user put at its name in a sticky one (status 8); root's own link and /tmp on the way are fine",
        .enabled(if: getuid() == 0)
    )
    func refusesPlantedDirectories() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
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
        #expect(
            link.status == 64 && link.stderr.contains("the symbolic link \(sticky)/app above the token file \(sticky)/app/token is owned by uid 65534"),
            "\(link)"
        )
        let theirs = sticky + "/theirs"
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
        #expect(chown(theirs, Self.otherUID, Self.otherUID) == 0)
        let inside = try daemon.cli(["sink", "mock", "--file", theirs + "/token", "--once"])
        #expect(inside.status == 64 && inside.stderr.contains("the directory \(theirs) above the token file"), "\(inside)")
        #expect(Self.entries(victim).isEmpty && Self.entries(theirs).isEmpty, "nothing written: \(Self.entries(victim)) \(Self.entries(theirs))")

        // The file right in the sticky directory: written there, but a file another user put at
        // its name first stops the sink (status 8) instead of being served to the service.
        let direct = try daemon.cli(["sink", "mock", "--file", sticky + "/svc.env", "--format", "env", "--once"])
        let written = try String(contentsOfFile: sticky + "/svc.env", encoding: .utf8)
        #expect(direct.status == 0 && written.hasPrefix("AUTHGATE_TOKEN="), "\(direct)")
        try Data("LD_PRELOAD=/tmp/x.so\n".utf8).write(to: URL(fileURLWithPath: sticky + "/planted.env"))
        #expect(chown(sticky + "/planted.env", Self.otherUID, Self.otherUID) == 0)
        let taken = try daemon.cli(["sink", "mock", "--file", sticky + "/planted.env", "--format", "env", "--once"])
        #expect(taken.status == 8 && taken.stderr.contains("a file of uid 65534"), "\(taken)")
        #expect(try String(contentsOfFile: sticky + "/planted.env", encoding: .utf8) == "LD_PRELOAD=/tmp/x.so\n")

        // Root's own link, in root's directory under /tmp (sticky, root's): followed.
        try FileManager.default.createSymbolicLink(atPath: scratch + "/mine", withDestinationPath: "victim")
        let mine = try daemon.cli(["sink", "mock", "--file", scratch + "/mine/token", "--once"])
        #expect(mine.status == 0, "\(mine)")
        #expect(Self.entries(victim) == ["token"])
    }

    @Test("--mode with a group or other write bit is a usage error and writes nothing; other-readable works with a warning")
    func modes() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
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

    @Test("once started, the sink writes and removes its file in the directory it opened, even after a link is swapped in for it")
    func writesThroughItsDirectory() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.quicklyRefreshedMock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let out = scratch + "/out"
        let moved = scratch + "/moved"
        let elsewhere = scratch + "/elsewhere"
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

    @Test("FileTrust.openDirectory walks `..`, `.`, `//` and the caller's links; refuses a path naming no file, a missing directory and a link loop")
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
        for (path, sentence) in [
            (scratch.path + "/a/", "does not name a file"), (scratch.path + "/a/..", "does not name a file"),
            (scratch.path + "/a/x/token", "cannot open the directory \(scratch.path)/a/x"),
            (scratch.path + "/loop/token", "cannot follow the symbolic link \(scratch.path)/loop"),
        ] {
            guard case .failure(let problem) = FileTrust.openDirectory(of: path, as: .tokenFile) else {
                Issue.record("\(path) was accepted")
                continue
            }
            #expect(problem.description.contains(sentence), "\(path): \(problem)")
        }
    }

    // MARK: Sinks that write what services read

    static func token(_ daemon: DaemonProcess) throws -> String {
        try daemon.cli(["token", "mock", "--min-valid", "0"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func occurrences(of text: String, in whole: String) -> Int {
        whole.components(separatedBy: text).count - 1
    }

    @Test(
        "the template is read by the daemon's file-trust rule: another user's file, directory or link (to a root-only file) and a link as the template are refused, and nothing is written",
        .enabled(if: getuid() == 0)
    )
    func templateIsTrusted() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let secret = try Self.rootSecret(in: scratch)
        let output = scratch + "/out"
        func sink(_ template: String) throws -> ProcessOutput {
            try daemon.cli(["sink", "mock", "--file", output, "--format", "template", "--template", template, "--owner", "nobody", "--once"])
        }
        // The service user's directory, with their link to the root-only file in it.
        let theirs = scratch + "/svc"
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false)
        #expect(chown(theirs, Self.otherUID, Self.otherUID) == 0)
        try FileManager.default.createSymbolicLink(atPath: theirs + "/t", withDestinationPath: secret)
        #expect(lchown(theirs + "/t", Self.otherUID, Self.otherUID) == 0)
        let inTheirs = try sink(theirs + "/t")
        #expect(
            inTheirs.status == 64 && inTheirs.stderr.contains("the directory \(theirs) above the template \(theirs)/t is owned by uid 65534"),
            "\(inTheirs)"
        )
        // Their link in a sticky root directory (as /tmp), to root's directory.
        let sticky = scratch + "/sticky"
        try FileManager.default.createDirectory(atPath: sticky, withIntermediateDirectories: false)
        #expect(chmod(sticky, 0o1777) == 0)
        try FileManager.default.createSymbolicLink(atPath: sticky + "/d", withDestinationPath: scratch)
        #expect(lchown(sticky + "/d", Self.otherUID, Self.otherUID) == 0)
        let throughLink = try sink(sticky + "/d/root-only")
        #expect(throughLink.status == 64 && throughLink.stderr.contains("the symbolic link \(sticky)/d above the template"), "\(throughLink)")
        // A file of theirs in root's directory.
        try "{{token}}\n".write(toFile: scratch + "/their-template", atomically: false, encoding: .utf8)
        #expect(chown(scratch + "/their-template", Self.otherUID, Self.otherUID) == 0)
        let theirFile = try sink(scratch + "/their-template")
        #expect(theirFile.status == 64 && theirFile.stderr.contains("is owned by uid 65534"), "\(theirFile)")
        // A link as the template itself, even root's.
        try FileManager.default.createSymbolicLink(atPath: scratch + "/link", withDestinationPath: secret)
        let link = try sink(scratch + "/link")
        #expect(link.status == 64 && link.stderr.contains("the template \(scratch)/link is a symbolic link"), "\(link)")
        // Not a regular file.
        let fifo = try sink("/dev/null")
        #expect(fifo.status == 64 && fifo.stderr.contains("is not a regular file"), "\(fifo)")
        #expect(!FileManager.default.fileExists(atPath: output), "nothing was copied")
        for result in [inTheirs, throughLink, theirFile, link] { #expect(!result.stdout.contains("ROOT-ONLY") && !result.stderr.contains("ROOT-ONLY")) }

        // Root's own template in root's directory is used.
        let fine = try sink(secret)
        #expect(fine.status == 0, "\(fine)")
        #expect(try String(contentsOfFile: output, encoding: .utf8).hasPrefix("ROOT-ONLY-CONTENT "))
    }

    @Test(
        "--mkdir checks before it makes: under another user's directory or through their link it makes nothing, and 150 raced swaps of a new directory for a link never re-own or re-mode the victim",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))
    )
    func mkdirChecksFirst() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        chmod(scratch, 0o755)
        let evil = scratch + "/evil"
        try FileManager.default.createDirectory(atPath: evil, withIntermediateDirectories: false)
        #expect(chown(evil, Self.otherUID, Self.otherUID) == 0)
        let under = try daemon.cli(["sink", "mock", "--file", evil + "/sub/token", "--mkdir", "--group", "nogroup", "--once"])
        #expect(under.status == 64 && under.stderr.contains("the directory \(evil) above the token file"), "\(under)")
        #expect(Self.entries(evil).isEmpty, "no directory left behind: \(Self.entries(evil))")

        // Their link, in a sticky directory, into a root-only 0700 directory.
        let vault = scratch + "/vault"
        try FileManager.default.createDirectory(atPath: vault, withIntermediateDirectories: false)
        #expect(chmod(vault, 0o700) == 0)
        let sticky = scratch + "/sticky"
        try FileManager.default.createDirectory(atPath: sticky, withIntermediateDirectories: false)
        #expect(chmod(sticky, 0o1777) == 0)
        try FileManager.default.createSymbolicLink(atPath: sticky + "/v", withDestinationPath: vault)
        #expect(lchown(sticky + "/v", Self.otherUID, Self.otherUID) == 0)
        let linked = try daemon.cli(["sink", "mock", "--file", sticky + "/v/new/token", "--mkdir", "--once"])
        #expect(linked.status == 64 && linked.stderr.contains("the symbolic link \(sticky)/v"), "\(linked)")
        #expect(Self.entries(vault).isEmpty, "no directory made in the vault: \(Self.entries(vault))")

        // The race: the other user swaps each directory the sink makes in their directory for a
        // link to a root-only file, as fast as they can, while root's sink runs 150 times.
        let victim = try Self.rootSecret(in: vault)
        let racer = Process()
        racer.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        racer.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3", "-c",
            """
            import os, sys, time
            d, victim, end = sys.argv[1], sys.argv[2], time.monotonic() + 60
            n = 0
            while time.monotonic() < end and not os.path.exists(d + '/stop'):
                try:
                    os.rename(d + '/sub', d + '/old%d' % n); n += 1
                    os.symlink(victim, d + '/sub')
                except OSError:
                    pass
                try:
                    if os.path.islink(d + '/sub'): os.unlink(d + '/sub')
                except OSError:
                    pass
            """, evil, victim,
        ]
        try racer.run()
        defer {
            _ = FileManager.default.createFile(atPath: evil + "/stop", contents: nil)
            racer.waitUntilExit()
        }
        for _ in 0..<150 {
            let attempt = try daemon.cli(["sink", "mock", "--file", evil + "/sub/token", "--mkdir", "--group", "nogroup", "--once"])
            #expect(attempt.status == 64, "\(attempt)")
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: victim)
        let (mode, uid, gid) = (
            attributes[.posixPermissions] as? Int, (attributes[.ownerAccountID] as? NSNumber)?.intValue,
            (attributes[.groupOwnerAccountID] as? NSNumber)?.intValue
        )
        #expect(
            mode == 0o600 && uid == 0 && gid == 0,
            "the victim is as it was: mode \(String(describing: mode)) uid \(String(describing: uid)) gid \(String(describing: gid))"
        )
        #expect(Self.entries(evil).allSatisfy { !$0.hasPrefix("old") }, "the sink never made a directory there")
    }
}
