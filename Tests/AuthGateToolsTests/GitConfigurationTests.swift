import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate git-credential configure|unconfigure HOST` with the real git, in a home of the
/// test's own (`git config --global` writes `$HOME/.gitconfig`).
@Suite("git's credential lines for a host")
struct GitConfigurationTests {
    private func lines(_ home: String) throws -> [String] {
        let text = (try? String(contentsOfFile: home + "/.gitconfig", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    @Test(
        "configure writes the reset and the helper (with useHttpPath when asked), twice the same; unconfigure removes those and keeps another helper's line; a URL is not a host",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/git"))
    )
    func configureAndUnconfigure() throws {
        let home = try ScratchDirectory()
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"]
        let host = "git.example.com:8443"
        for _ in 0..<2 {
            let done = try GitConfiguration.apply(configure: true, host: host, useHttpPath: true, environment: environment)
            #expect(done.output.hasPrefix("git config --global --add credential.https://\(host).helper ''\n"), "\(done.output)")
            #expect(done.note == nil)
        }
        // The reset (an empty helper), then this helper (by name, or this program's path).
        let helpers = try lines(home.path).filter { $0.hasPrefix("helper") }
        #expect(helpers.count == 2 && helpers.first == "helper =" && helpers.last?.contains("authgate") == true, "\(helpers)")
        let written = try lines(home.path)
        #expect(written.contains("useHttpPath = true"), "\(written)")

        // Another helper for the host, added by hand, outlives unconfigure.
        let status = try run(["git", "config", "--global", "--add", "credential.https://\(host).helper", "cache"], environment)
        #expect(status == 0)
        let removed = try GitConfiguration.apply(configure: false, host: host, useHttpPath: true, environment: environment)
        #expect(removed.output.isEmpty && removed.note?.contains("removed git's credential lines for https://\(host)") == true)
        let left = try lines(home.path)
        #expect(left.filter { $0.hasPrefix("helper") } == ["helper = cache"], "\(left)")
        #expect(!left.contains("useHttpPath = true"))

        let refused = #expect(throws: ToolFailure.self) {
            try GitConfiguration.apply(configure: true, host: "https://git.example.com/", useHttpPath: false, environment: environment)
        }
        #expect(refused?.status == ToolFailure.inputRefused && refused?.description.hasSuffix("[invalid_params]") == true)
    }

    private func run(_ arguments: [String], _ environment: [String: String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
