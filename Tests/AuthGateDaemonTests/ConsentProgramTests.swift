import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Which program a consent question names, read from real processes.
@Suite("The program a consent question is about")
struct ConsentProgramTests {
    @Test(
        "authgate's own executable started by a service manager (systemd runs a sink's unit) is the program, not the manager, and cannot be allowed always"
    )
    func serviceManagerIsNeverTheProgram() throws {
        let scratch = try ScratchDirectory()
        // A shell named systemd plays the user's manager; /bin/sleep plays authgate's CLI.
        let manager = scratch.path + "/systemd"
        try FileManager.default.copyItem(atPath: URL(fileURLWithPath: "/bin/sh").resolvingSymlinksInPath().path, toPath: manager)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: manager)
        process.arguments = ["-c", "/bin/sleep 30; true"]
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let children = "/proc/\(process.processIdentifier)/task/\(process.processIdentifier)/children"
        var child: Int32?
        try eventually("the manager started no child") {
            child = (try? String(contentsOfFile: children, encoding: .utf8))?.split(separator: " ").first.flatMap { Int32($0) }
            return child != nil && (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child!)/exe"))?.hasSuffix("sleep") == true
        }
        defer { if let child { kill(child, SIGKILL) } }
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(child!)/exe")
        let attributes = try FileManager.default.attributesOfItem(atPath: executable)
        let device = try #require((attributes[.systemNumber] as? NSNumber)?.uint64Value)
        let inode = try #require((attributes[.systemFileNumber] as? NSNumber)?.uint64Value)
        let tools = ToolFiles(identities: [[device, inode]])

        let program = try #require(ConsentProgram.find(pid: child!, uid: getuid(), tools: tools))
        #expect(program.path.hasSuffix("sleep"), "the tool itself, not \(program.path)")
        #expect(program.digest == nil, "no always for authgate's own executable")
        #expect(ConsentProgram.isServiceManager("/usr/lib/systemd/systemd") && !ConsentProgram.isServiceManager("/usr/bin/deploy"))
    }
}
