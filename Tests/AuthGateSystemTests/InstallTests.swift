import AuthGateTestSupport
import Foundation
import Testing

/// `scripts/install` staged into a DESTDIR (no root needed, nothing on this machine touched),
/// with the built programs: what it installs, and that `--uninstall` takes it away again.
@Suite("scripts/install")
struct InstallTests {
    static let install = LoopbackServer.repository.appendingPathComponent("scripts/install")

    @Test("binaries, units, man pages naming every subcommand and option, shell completions; --uninstall removes them")
    func stagedInstall() throws {
        // scripts/test builds swift-argument-parser's generate-manual next to the programs.
        try #require(
            FileManager.default.isExecutableFile(atPath: BuiltProducts.directory.appendingPathComponent("generate-manual").path),
            "run scripts/test, which builds generate-manual"
        )
        let stage = try ScratchDirectory()
        let environment = ["DESTDIR": stage.path, "PREFIX": "/usr/local"]
        let installed = try run(
            URL(fileURLWithPath: "/bin/bash"),
            [Self.install.path, "--bin-dir", BuiltProducts.directory.path],
            environment: environment
        )
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        let share = stage.path + "/usr/local/share"
        for file in [
            "/usr/local/bin/authgated", "/usr/local/bin/authgate", "/usr/local/bin/git-credential-authgate",
            "/usr/local/lib/systemd/system/authgated.service", "/usr/local/share/man/man1/authgate.1",
            "/usr/local/share/man/man8/authgated.8",
        ] {
            #expect(FileManager.default.fileExists(atPath: stage.path + file), "\(file) is installed")
        }
        // One executable: the daemon and the helpers are links to authgate, beside it.
        let attributes = try FileManager.default.attributesOfItem(atPath: stage.path + "/usr/local/bin/authgate")
        #expect(attributes[.type] as? FileAttributeType == .typeRegular)
        for program in ["authgated", "git-credential-authgate", "docker-credential-authgate"] {
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: stage.path + "/usr/local/bin/" + program)
            #expect(target == "authgate", "\(program) links to \(target ?? "nothing")")
        }

        // authgate(1) has an entry for every subcommand its --help lists.
        let manual = try String(contentsOfFile: share + "/man/man1/authgate.1", encoding: .utf8)
        #expect(manual.contains(".Dt AUTHGATE 1"))
        let help = try run(BuiltProducts.cli, ["--help"]).stdout
        // The SUBCOMMANDS section runs to the first blank line.
        let section = help.components(separatedBy: "SUBCOMMANDS:").last?.components(separatedBy: "\n\n").first ?? ""
        let subcommands = section.split(separator: "\n")
            .compactMap { line -> String? in
                guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
                return line.split(separator: " ").first.map(String.init)
            }
        #expect(subcommands.count >= 15, "\(subcommands)")
        for subcommand in subcommands {
            #expect(manual.contains(".It Em \(subcommand)\n"), "authgate(1) describes \(subcommand)")
        }
        // authgated(8) has every option of authgated --help.
        let daemonManual = try String(contentsOfFile: share + "/man/man8/authgated.8", encoding: .utf8)
        let options = Set(
            try run(BuiltProducts.daemon, ["--help"]).stdout.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
                .filter { $0.hasPrefix("--") && $0.count > 3 }.map { String($0) }
        )
        #expect(options.contains("--metrics-listen") && options.contains("--providers"), "\(options)")
        for option in options {
            #expect(daemonManual.contains("Fl -\(option.dropFirst(2))"), "authgated(8) describes \(option)")
        }

        // Completions: bash's parses, and each names the subcommands.
        for (file, shell) in [
            ("/bash-completion/completions/authgate", "bash"), ("/zsh/site-functions/_authgate", "zsh"),
            ("/fish/vendor_completions.d/authgate.fish", "fish"),
        ] {
            let script = try String(contentsOfFile: share + file, encoding: .utf8)
            #expect(["kubectl", "sink", "exec", "login"].allSatisfy(script.contains), "\(shell) completes the subcommands")
        }
        #expect(try run(URL(fileURLWithPath: "/bin/bash"), ["-n", share + "/bash-completion/completions/authgate"]).status == 0)

        let removed = try run(URL(fileURLWithPath: "/bin/bash"), [Self.install.path, "--uninstall"], environment: environment)
        #expect(removed.status == 0, "\(removed.stderr)")
        for file in ["/usr/local/bin/authgate", "/usr/local/share/man/man1/authgate.1", "/usr/local/share/zsh/site-functions/_authgate"] {
            #expect(!FileManager.default.fileExists(atPath: stage.path + file), "\(file) is removed")
        }
    }

    @Test(
        "the quick start installs what building and running need, nothing of the tests: scripts/run and scripts/install ask for the build packages only, and no test service is among them"
    )
    func quickStartInstallsNoTestService() throws {
        let repository = LoopbackServer.repository.path
        // A PATH with grep alone: every package looks missing, so each function names all it installs.
        let scratch = try ScratchDirectory()
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/grep", withDestinationPath: "/usr/bin/grep")
        func names(_ function: String) throws -> Set<String> {
            let listed = try run(
                URL(fileURLWithPath: "/bin/bash"),
                ["-c", "cd \"$0\" && source scripts/lib.sh && \(function)", repository],
                environment: ["PATH": scratch.path]
            )
            return Set(listed.stdout.split(separator: "\n").map(String.init))
        }
        let build = try names("missing_build_packages")
        #expect(build == ["libcurl4-openssl-dev"], "\(build)")
        let test = try names("missing_test_packages")
        // (nginx and sshd are looked for at their absolute paths too, so they need not show here.)
        #expect(["prometheus", "dbus", "gnome-keyring", "libsecret-tools", "curl"].allSatisfy(test.contains) && build.isDisjoint(with: test), "\(test)")
        for script in ["scripts/run", "scripts/install"] {
            let text = try String(contentsOfFile: repository + "/" + script, encoding: .utf8)
            #expect(text.contains("ensure_build_packages") && !text.contains("ensure_system_packages"), "\(script)")
        }
        #expect(try String(contentsOfFile: repository + "/scripts/test", encoding: .utf8).contains("ensure_system_packages"))
    }
}
