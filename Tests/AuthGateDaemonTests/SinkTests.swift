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
