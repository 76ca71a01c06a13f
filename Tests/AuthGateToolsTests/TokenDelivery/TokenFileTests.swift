import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The token file the sink and exec write")
struct TokenFileTests {
    private func open(_ path: String) throws -> TokenFile {
        guard case .success(let directory) = FileTrust.openDirectory(of: path, as: .tokenFile) else {
            throw POSIXError(.EACCES)
        }
        return TokenFile(directory, shown: path)
    }

    @Test("written whole with its mode, replaced in one step, no temporary file left; removed on request")
    func writeReplaceRemove() throws {
        let scratch = try ScratchDirectory()
        let file = try open(scratch.path + "/token")
        try file.write(Array("first-token".utf8), mode: 0o440)
        #expect(try String(contentsOfFile: scratch.path + "/token", encoding: .utf8) == "first-token")
        #expect((try FileManager.default.attributesOfItem(atPath: scratch.path + "/token")[.posixPermissions] as? Int) == 0o440)
        let before = try FileManager.default.attributesOfItem(atPath: scratch.path + "/token")[.systemFileNumber] as? Int
        try file.write(Array("second".utf8), mode: 0o400)
        #expect(try String(contentsOfFile: scratch.path + "/token", encoding: .utf8) == "second")
        let after = try FileManager.default.attributesOfItem(atPath: scratch.path + "/token")[.systemFileNumber] as? Int
        #expect(before != after, "a new file renamed over the old one, not the old one rewritten")
        #expect(scratch.entries == ["token"])
        file.remove(because: "the test is done", mode: 0o400)
        #expect(scratch.entries.isEmpty)
    }

    @Test(
        "in a sticky directory anyone may add to (/tmp's kind), the name is held from the start (an empty file), emptied instead of removed, and another user's file in its place stops the writer",
        .enabled(if: geteuid() == 0, "needs root to make a root-owned sticky directory and give a file away")
    )
    func stickyDirectoryNameHeld() throws {
        let scratch = try ScratchDirectory()
        let sticky = scratch.path + "/tmp"
        try FileManager.default.createDirectory(atPath: sticky, withIntermediateDirectories: false)
        #expect(chmod(sticky, 0o1777) == 0)
        let file = try open(sticky + "/svc.env")
        try file.claim(mode: 0o600)
        #expect(try Data(contentsOf: URL(fileURLWithPath: sticky + "/svc.env")).isEmpty, "the name is held by an empty file")
        try file.write(Array("TOKEN=t".utf8), mode: 0o600)
        file.remove(because: "the session ended", mode: 0o600)
        #expect(try Data(contentsOf: URL(fileURLWithPath: sticky + "/svc.env")).isEmpty, "emptied, not removed")

        // Another user's file where the name was free: the writer stops rather than serve it.
        let planted = try open(sticky + "/planted.env")
        try Data("LD_PRELOAD=/tmp/x.so".utf8).write(to: URL(fileURLWithPath: sticky + "/planted.env"))
        #expect(chown(sticky + "/planted.env", 65534, 65534) == 0)
        for attempt in [{ try planted.claim(mode: 0o600) }, { try planted.write(Array("TOKEN=t".utf8), mode: 0o600) }] {
            do {
                try attempt()
                Issue.record("another user's file was taken as the sink's")
            } catch let failure as TokenFile.Failure {
                #expect(failure.kind == .taken && failure.description.contains("a file of uid 65534"), "\(failure)")
            }
        }
        #expect(try String(contentsOfFile: sticky + "/planted.env", encoding: .utf8) == "LD_PRELOAD=/tmp/x.so", "left as it was")
    }

    @Test("a directory removed since the start is said so, not written into by another path")
    func directoryRemoved() throws {
        let scratch = try ScratchDirectory()
        let directory = scratch.path + "/run"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let file = try open(directory + "/token")
        try file.write(Array("first".utf8), mode: 0o400)
        try FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        do {
            try file.write(Array("second".utf8), mode: 0o400)
            Issue.record("written into a removed directory")
        } catch let failure as TokenFile.Failure {
            #expect(failure.kind == .gone && failure.description.contains("was removed since the start"), "\(failure)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/token"), "nothing in the new directory of that name")
    }

    @Test("a symbolic link planted at the file's name is replaced, never followed")
    func plantedLink() throws {
        let scratch = try ScratchDirectory()
        let target = scratch.path + "/elsewhere"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: target))
        let file = try open(scratch.path + "/token")
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/token", withDestinationPath: target)
        try file.write(Array("token".utf8), mode: 0o400)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: scratch.path + "/token")) == nil)
    }

    @Test("--owner and --group: names or numbers; an unknown name is refused with a usage status")
    func ownership() throws {
        guard geteuid() == 0 else {
            #expect(throws: ToolFailure.self) { try FileOwnership(owner: "root", group: nil) }
            return
        }
        let numbers = try FileOwnership(owner: "0", group: "0")
        #expect(numbers.uid == 0 && numbers.gid == 0)
        #expect(try FileOwnership(owner: "root", group: nil).uid == 0)
        do {
            _ = try FileOwnership(owner: "no-such-user-here", group: nil)
            Issue.record("an unknown user was accepted")
        } catch let failure as ToolFailure {
            #expect(failure.status == ToolFailure.usage && failure.description.contains("no such user"))
        }
    }
}
