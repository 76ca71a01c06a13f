import AuthGateTestSupport
import Foundation
import Testing

/// scripts/check-architecture, which the test run uses to keep the daemon's folders depending
/// one way, on a copy of the module and its map: it passes on them as they are, and fails,
/// naming what is wrong, on each way they can drift.
@Suite("The daemon's folder map is checked")
struct ArchitectureCheckTests {
    /// A copy of Sources/AuthGateDaemon and docs/ARCHITECTURE.md laid out as the repository.
    struct Copy {
        let root: URL

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("architecture-\(UUID().uuidString)")
            for path in ["Sources/AuthGateDaemon", "docs/ARCHITECTURE.md"] {
                let target = root.appendingPathComponent(path)
                try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: Repository.root.appendingPathComponent(path), to: target)
            }
        }

        func check() throws -> ProcessOutput {
            try run(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", Repository.root.appendingPathComponent("scripts/check-architecture").path, "--root", root.path]
            )
        }

        func edit(_ path: String, _ change: (String) -> String) throws {
            let file = root.appendingPathComponent(path)
            try change(try String(contentsOf: file, encoding: .utf8)).write(to: file, atomically: true, encoding: .utf8)
        }

        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    @Test("the module as it is passes")
    func passes() throws {
        let copy = try Copy()
        defer { copy.remove() }
        let result = try copy.check()
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test("a folder naming a type of a folder it may not use fails, with the file, the line and the type")
    func forbiddenUse() throws {
        let copy = try Copy()
        defer { copy.remove() }
        // Sessions/ may not use Metrics/ (the metrics observe the sessions, not the other way).
        try copy.edit("Sources/AuthGateDaemon/Sessions/SessionKey.swift") { $0 + "\nlet planted: DaemonMetrics? = nil\n" }
        let result = try copy.check()
        #expect(result.status == 1)
        #expect(
            result.stderr.contains("Sources/AuthGateDaemon/Sessions/SessionKey.swift:")
                && result.stderr.contains("Sessions/ names DaemonMetrics, declared in Metrics/, which Sessions/ may not use"),
            "\(result.stderr)"
        )
        // In a comment or a string it is not a use.
        try copy.edit("Sources/AuthGateDaemon/Sessions/SessionKey.swift") {
            $0.replacingOccurrences(of: "let planted: DaemonMetrics? = nil", with: "// DaemonMetrics\nlet planted = \"DaemonMetrics\"")
        }
        #expect(try copy.check().status == 0)
    }

    @Test("a loop in the map, a folder the map misses and one it names that is not there each fail")
    func mapProblems() throws {
        let copy = try Copy()
        defer { copy.remove() }
        try copy.edit("docs/ARCHITECTURE.md") { $0.replacingOccurrences(of: "Host/           uses  nothing", with: "Host/           uses  Methods") }
        let loop = try copy.check()
        #expect(loop.status == 1 && loop.stderr.contains("the folders' map has a loop: "), "\(loop.stderr)")

        let missing = try Copy()
        defer { missing.remove() }
        try FileManager.default.createDirectory(at: missing.root.appendingPathComponent("Sources/AuthGateDaemon/Extra"), withIntermediateDirectories: true)
        try "struct Extra {}\n".write(to: missing.root.appendingPathComponent("Sources/AuthGateDaemon/Extra/Extra.swift"), atomically: true, encoding: .utf8)
        try missing.edit("docs/ARCHITECTURE.md") { $0.replacingOccurrences(of: "Logging/        uses  nothing", with: "Gone/           uses  nothing") }
        let result = try missing.check()
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("the map has no line for the folder Extra/"), "\(result.stderr)")
        #expect(result.stderr.contains("the map names Gone/, which Sources/AuthGateDaemon does not have"), "\(result.stderr)")
    }
}
