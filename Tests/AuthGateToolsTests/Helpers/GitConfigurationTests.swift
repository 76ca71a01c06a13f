import AuthGateCore
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
        "configure writes the reset and the helper (with useHttpPath when asked), prints what it wrote, and a second time writes and prints nothing, saying so; unconfigure removes those and keeps another helper's line, and says when there was nothing; a URL is not a host",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/git"))
    )
    func configureAndUnconfigure() throws {
        let home = try ScratchDirectory()
        let environment = ["HOME": home.path, "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"]
        let host = "git.example.com:8443"
        let done = try GitConfiguration.apply(configure: true, host: host, useHttpPath: true, environment: environment)
        #expect(done.output.hasPrefix("git config --global --add credential.https://\(host).helper ''\n"), "\(done.output)")
        #expect(done.output.hasSuffix("git config --global credential.https://\(host).useHttpPath true\n") && done.note == nil, "\(done.output)")
        let again = try GitConfiguration.apply(configure: true, host: host, useHttpPath: true, environment: environment)
        #expect(again.output.isEmpty && again.note == "git's credential lines for https://\(host) are already there; nothing was written.")
        let before = try lines(home.path)
        // The reset (an empty helper), then this helper (by name, or this program's path).
        let helpers = try lines(home.path).filter { $0.hasPrefix("helper") }
        #expect(helpers.count == 2 && helpers.first == "helper =" && helpers.last?.contains("authgate") == true, "\(helpers)")
        let written = try lines(home.path)
        #expect(written.contains("useHttpPath = true") && written == before, "\(written)")

        // Another helper for the host, added by hand, outlives unconfigure.
        let status = try run(["git", "config", "--global", "--add", "credential.https://\(host).helper", "cache"], environment)
        #expect(status == 0)
        let removed = try GitConfiguration.apply(configure: false, host: host, useHttpPath: true, environment: environment)
        #expect(removed.output.isEmpty && removed.note?.contains("removed git's credential lines for https://\(host)") == true)
        let left = try lines(home.path)
        #expect(left.filter { $0.hasPrefix("helper") } == ["helper = cache"], "\(left)")
        #expect(!left.contains("useHttpPath = true"))
        let nothing = try GitConfiguration.apply(configure: false, host: host, useHttpPath: false, environment: environment)
        #expect(nothing.note == "there were no git credential lines of authgate's for https://\(host); nothing was removed.")
        // Only the missing useHttpPath is written, and printed, when the helper lines are there.
        _ = try GitConfiguration.apply(configure: true, host: host, useHttpPath: false, environment: environment)
        let path = try GitConfiguration.apply(configure: true, host: host, useHttpPath: true, environment: environment)
        #expect(path.output == "git config --global credential.https://\(host).useHttpPath true\n", "\(path.output)")

        let refused = #expect(throws: ToolFailure.self) {
            try GitConfiguration.apply(configure: true, host: "https://git.example.com/", useHttpPath: false, environment: environment)
        }
        #expect(refused?.status == ToolFailure.inputRefused && refused?.description.hasSuffix("[invalid_params]") == true)
    }

    @Test("configure warns of a host no provider lists for git, naming the hosts they list, or of one that needs useHttpPath")
    func coverageWarning() {
        func listing(_ provider: String, _ hosts: [String], tools: [String] = ["git", "docker"], paths: [String] = []) -> CredentialHosts.Listing {
            CredentialHosts.Listing(
                provider: provider,
                helper: ProviderConfiguration.CredentialHelper(hosts: hosts, username: "oauth2", tools: tools, paths: paths, authType: .basic)
            )
        }
        let listings = [listing("corp", ["git.example.com"]), listing("registry", ["registry.example.com"], tools: ["docker"])]
        #expect(GitConfiguration.coverageWarning(host: "git.example.com:443", useHttpPath: false, listings: listings) == nil)
        #expect(
            GitConfiguration.coverageWarning(host: "registry.example.com", useHttpPath: false, listings: listings)
                == "no provider you may use lists registry.example.com for git, so git will get no token from authgate for it until one does; their credential_helper hosts for git: git.example.com (corp)."
        )
        #expect(GitConfiguration.coverageWarning(host: "x.example.com", useHttpPath: false, listings: [])?.hasSuffix("; none lists any host for git.") == true)
        let scoped = [listing("orga", ["forge.example.com"], paths: ["org-a/"])]
        #expect(GitConfiguration.coverageWarning(host: "forge.example.com", useHttpPath: false, listings: scoped)?.hasSuffix("add --use-http-path.") == true)
        #expect(GitConfiguration.coverageWarning(host: "forge.example.com", useHttpPath: true, listings: scoped) == nil)
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

    @Test("configure's check when the daemon cannot be asked: a warning that says so, with where it looked")
    func coverageUnchecked() throws {
        let scratch = try ScratchDirectory()
        let warning = GitConfiguration.coverageWarning(host: "git.example.com", useHttpPath: false, socket: scratch.path + "/none.sock")
        #expect(
            warning?.hasPrefix("cannot check that a provider lists git.example.com for git: ") == true && warning?.contains("/none.sock") == true,
            "\(warning ?? "")"
        )
    }
}
