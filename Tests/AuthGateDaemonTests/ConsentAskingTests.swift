import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateCore
@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// How consent's questions are put, in process: which environment the askpass program and the
/// notification get for whose question, what the notification shows, and which program a
/// caller's command line names.
@Suite("Consent questions (in process)")
struct ConsentAskingTests {
    private func question(uid: UInt32, executable: String = "/usr/bin/tool", canAllowAlways: Bool = true) -> ConsentQuestion {
        ConsentQuestion(
            provider: ProviderID("corp")!,
            providerName: "Corp",
            session: .default,
            uid: uid,
            pid: 4242,
            executable: executable,
            commandLine: "tool --sync",
            through: "/usr/bin/authgate token corp",
            canAllowAlways: canAllowAlways
        )
    }

    @Test("a daemon started with a user's desktop (sudo -E) gives that desktop only to that user's questions")
    func desktopOnlyForItsOwner() throws {
        let scratch = try ScratchDirectory()
        let runtime = scratch.path + "/run-user"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false)
        let owner = UInt32(getuid() == 0 ? 65534 : getuid())
        if getuid() == 0 { chown(runtime, owner, owner) }
        let environment = ["XDG_RUNTIME_DIR": runtime, "DISPLAY": ":1", "PATH": "/usr/bin:/bin", "WAYLAND_DISPLAY": "wayland-0"]
        let desktop = DesktopEnvironment(lines: environment.map { "\($0.key)=\($0.value)" }.sorted(), owner: DesktopEnvironment.owner(of: environment))
        #expect(desktop.owner == owner)
        #expect(desktop.lines(for: owner).contains("DISPLAY=:1"))
        let other = desktop.lines(for: owner &+ 1)
        #expect(other == ["PATH=/usr/bin:/bin"], "\(other)")
    }

    @Test(
        "the notification question: another uid's is not shown on this desktop; the summary is markup-escaped; always is offered only for a program with a file of its own"
    )
    func notification() async throws {
        let scratch = try ScratchDirectory()
        let record = scratch.path + "/args"
        try scratch.write("notify-send", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \(record)\necho once\n")
        chmod(scratch.path + "/notify-send", 0o755)
        let asker = NotificationQuestion(program: scratch.path + "/notify-send", environment: DesktopEnvironment(lines: ["PATH=/usr/bin:/bin"], owner: 1000))
        let refused = await asker.ask(question(uid: 1001), timeout: .seconds(10))
        guard case .failed(let why) = refused else {
            Issue.record("another uid's question was shown: \(refused)")
            return
        }
        #expect(why.contains("uid 1000's, not uid 1001's"))
        #expect(!FileManager.default.fileExists(atPath: record))

        let answered = await asker.ask(question(uid: 1000, executable: "/tmp/<b>x</b>&", canAllowAlways: false), timeout: .seconds(10))
        #expect(answered == .answered(.once))
        let arguments = try String(contentsOfFile: record, encoding: .utf8)
        #expect(arguments.contains("Allow /tmp/&lt;b&gt;x&lt;/b&gt;&amp; (pid 4242"), "\(arguments)")
        #expect(!arguments.contains("<b>") && !arguments.contains("--action=always"), "\(arguments)")
        #expect(arguments.contains("--action=running="))
    }

    @Test(
        "which argument is the script an interpreter runs",
        arguments: [
            (["bash", "deploy.sh", "--fast"], ConsentProgram.ScriptArgument.file("deploy.sh")),
            (["python3", "-u", "/opt/sync.py"], .file("/opt/sync.py")),
            (["sh", "-c", "authgate token corp"], .inline),
            (["bash", "-ec", "authgate token corp"], .inline),
            (["perl", "-e", "print 1"], .inline),
            (["python3", "-m", "sync"], .none),
            (["bash"], .none),
            (["-bash"], .none),
        ]
    )
    func scriptArgument(_ arguments: [String], _ expected: ConsentProgram.ScriptArgument) {
        #expect(ConsentProgram.scriptArgument(arguments) == expected)
    }

    @Test("interpreters by their file name, versions included; other programs are themselves")
    func interpreters() {
        for path in ["/usr/bin/python3.11", "/bin/sh", "/usr/bin/dash", "/usr/bin/perl5.36.0", "/usr/bin/node", "/usr/bin/bash"] {
            #expect(ConsentProgram.isInterpreter(path), "\(path)")
        }
        for path in ["/usr/bin/git", "/usr/local/bin/deploy", "/usr/bin/shred", "/usr/bin/pythonic-tool"] {
            #expect(!ConsentProgram.isInterpreter(path), "\(path)")
        }
    }
}
