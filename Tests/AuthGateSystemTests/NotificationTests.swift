import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A desktop's notification server on a private session bus: Tests/idp/notifications.py, which
/// records every notification and, with `invoke`, clicks that action at once.
private final class NotificationDesktop: Sendable {
    let bus: PrivateSessionBus
    let server: LoopbackServer
    /// Where a stand-in `xdg-open` (first on the daemon's PATH) writes each URL it opens
    /// before it follows it, as a browser would, with curl.
    let opened: String
    let path: String

    init(invoke: String? = nil, caFile: String) throws {
        bus = try PrivateSessionBus()
        server = try LoopbackServer(
            script: "notifications.py",
            workdir: bus.home.path + "/server",
            arguments: invoke.map { ["--invoke", $0] } ?? [],
            environment: bus.environment
        )
        let bin = bus.home.path + "/bin"
        opened = bus.home.path + "/opened"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try Data(
            """
            #!/bin/sh
            printf '%s\\n' "$1" >> \(opened)
            exec curl -s -o /dev/null -L --cacert \(caFile) "$1"

            """.utf8
        ).write(to: URL(fileURLWithPath: bin + "/xdg-open"))
        chmod(bin + "/xdg-open", 0o755)
        path = bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
    }

    /// A per-user daemon's environment in this desktop session.
    var environment: [String: String] { bus.environment.merging(["PATH": path]) { _, new in new } }

    var notifications: [[String: Any]] {
        let text = (try? String(contentsOfFile: server.info["record"] as? String ?? "", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}

/// `authgated --notify` on a desktop: a session the provider ends is told about once, over the
/// session bus, with a Sign in action that signs in again from the daemon's side.
@Suite("Desktop notifications when a sign-in is needed")
struct NotificationTests {
    static let needsDesktop = Testing.ConditionTrait.enabled(
        if: ["/usr/bin/dbus-daemon", "/usr/bin/dbus-send", "/usr/bin/notify-send"].allSatisfy(FileManager.default.isExecutableFile(atPath:)),
        "needs dbus-daemon and notify-send (scripts/test installs dbus and libnotify-bin)"
    )

    /// faulty.py signing in with the password or a browser; its 4 s tokens are refreshed every
    /// 2 s or so, so that `refresh_refused` ends the session soon.
    private func provider(_ server: LoopbackServer) -> String {
        #"""
        {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password", "authorization_code"],
         "scopes": ["api"], "tls": {"ca_file": "\#(server.caFile)"}, "timeouts": {"connect_ms": 1000, "total_ms": 5000},
         "endpoints": {"authorization": "\#(server.issuer)/authorize"},
         "refresh": {"before_expiry_seconds": 2, "max_backoff_seconds": 1}}
        """#
    }

    /// faulty.py (its files in `scratch`), a desktop (with `invoke`, its server clicks that
    /// action), and a `--notify` daemon on it — or, with `withBus` false, one that has no session
    /// bus — signed in to faulty.
    private func signedIn(
        _ scratch: ScratchDirectory,
        invoke: String? = nil,
        withBus: Bool = true,
        logLevel: String = "info"
    ) throws -> (server: LoopbackServer, desktop: NotificationDesktop, daemon: DaemonProcess) {
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok", expiresIn: 4)
        let desktop = try NotificationDesktop(invoke: invoke, caFile: server.caFile)
        let daemon = try DaemonProcess(
            providers: ["faulty.json": provider(server)],
            arguments: ["--notify"],
            logLevel: logLevel,
            environment: withBus ? desktop.environment : withoutSessionBus
        )
        try daemon.signIn("faulty", username: "alice", password: "alice-password-1")
        return (server, desktop, daemon)
    }

    private func state(_ daemon: DaemonProcess) throws -> String? {
        let status = try daemon.cli(["status", "--json"]).stdout
        return ((try JSONSerialization.jsonObject(with: Data(status.utf8)) as? [[String: Any]])?.first)?["state"] as? String
    }

    @Test(
        "a refused refresh: one notification naming the provider, why and the command, never a token; none again while it waits, none for a sign-out",
        NotificationTests.needsDesktop
    )
    func oneNotificationPerEnding() throws {
        let scratch = try ScratchDirectory()
        let (server, desktop, daemon) = try signedIn(scratch)
        try server.setMode("refresh_refused")
        try eventually(timeout: .seconds(20)) { desktop.notifications.count == 1 }
        let shown = try #require(desktop.notifications.first)
        #expect(shown["app_name"] as? String == "authgate")
        #expect(shown["summary"] as? String == "Sign in to faulty again", "\(shown)")
        let body = shown["body"] as? String ?? ""
        #expect(body.contains("The refresh token is invalid or expired") && body.contains("Run: authgate login faulty"), "\(body)")
        #expect((shown["actions"] as? [String: String]) == ["signin": "Sign in"], "\(shown)")
        #expect(!"\(shown)".contains("faulty-at-") && !"\(shown)".contains("faulty-rt-"), "a token was shown")
        #expect(try state(daemon) == "login_required")
        // Tools keep failing on the ended session; nothing more is shown for it.
        #expect(try daemon.cli(["token", "faulty"]).status == 3)
        #expect(try daemon.cli(["token", "faulty"]).status == 3)

        // Signed out by the user: not told. Signed in again and ended again: told again.
        try server.setMode("ok")
        try daemon.signIn("faulty", username: "alice", password: "alice-password-1")
        #expect(try daemon.cli(["logout", "faulty"]).status == 0)
        try daemon.signIn("faulty", username: "alice", password: "alice-password-1")
        try server.setMode("refresh_refused")
        try eventually(timeout: .seconds(20)) { try state(daemon) == "login_required" }
        try eventually(timeout: .seconds(10)) { desktop.notifications.count >= 2 }
        #expect(desktop.notifications.count == 2, "\(desktop.notifications)")
        #expect(!daemon.logText.contains("faulty-at-") && !daemon.logText.contains("faulty-rt-"))
    }

    @Test(
        "the Sign in action starts the browser sign-in from the daemon (xdg-open on its page), and the session is back with no terminal",
        NotificationTests.needsDesktop
    )
    func signInAction() throws {
        let scratch = try ScratchDirectory()
        let (server, desktop, daemon) = try signedIn(scratch, invoke: "signin")
        let before = try daemon.cli(["token", "faulty", "--min-valid", "0"]).stdout
        // Refreshes are refused; a new sign-in (an authorization code) is not.
        try server.setMode("refresh_refused")
        try daemon.waitForLog("the notification's Sign in action was picked")
        try eventually(timeout: .seconds(20), "the session did not come back; log:\n\(daemon.logText)") {
            try state(daemon) == "authenticated" && daemon.logText.contains("sign-in page was opened")
        }
        let opened = try String(contentsOfFile: desktop.opened, encoding: .utf8)
        #expect(opened.hasPrefix(server.issuer + "/authorize?") && opened.contains("code_challenge="), "\(opened)")
        let after = try daemon.cli(["token", "faulty", "--min-valid", "0"])
        #expect(after.status == 0 && after.stdout != before, "\(after.stderr)")
        // (Refreshes are still refused, so the restored session may well end, and be told, again.)
        #expect(desktop.notifications.first?["actions"] as? [String: String] == ["signin": "Sign in"])
    }

    @Test(
        "saved sessions that cannot be opened at start-up (the storage key is gone): one notification says so, and the file is kept for the key's return, not given a new key",
        NotificationTests.needsDesktop
    )
    func savedSessionsLost() throws {
        let persistent = #"{"type": "mock", "storage": "persistent", "users": [{"username": "demo", "password": "demo-password-1"}]}"#
        let desktop = try NotificationDesktop(caFile: "/dev/null")
        var daemon = try DaemonProcess(providers: ["mock.json": persistent], arguments: ["--notify"], logLevel: "info", environment: desktop.environment)
        try daemon.signIn()
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        try FileManager.default.removeItem(atPath: daemon.stateDirectory + "/authgate.key")
        daemon = try DaemonProcess(
            providers: ["mock.json": persistent],
            arguments: ["--notify"],
            logLevel: "info",
            scratch: daemon.scratch,
            environment: desktop.environment
        )
        try eventually(timeout: .seconds(20)) { desktop.notifications.count == 1 }
        let shown = try #require(desktop.notifications.first)
        #expect(shown["summary"] as? String == "Your saved sign-ins could not be opened", "\(shown)")
        #expect((shown["body"] as? String)?.contains("authgate login") == true && (shown["actions"] as? [String: String])?.isEmpty == true)
        #expect(try daemon.cli(["token", "mock"]).status == 3)
        #expect((shown["body"] as? String)?.contains("not creating a new key") == true, "\(shown)")
        #expect(FileManager.default.fileExists(atPath: daemon.stateDirectory + "/sessions/\(getuid()).sessions"), "kept as it was")
        #expect(!FileManager.default.fileExists(atPath: daemon.stateDirectory + "/authgate.key"), "no new key")
    }

    @Test(
        "consent with no askpass program: the question is a notification with one action per answer; always is remembered",
        NotificationTests.needsDesktop,
        .enabled(if: !FileManager.default.fileExists(atPath: "/usr/bin/ssh-askpass"), "an installed ssh-askpass would be asked first")
    )
    func consentByNotification() throws {
        let desktop = try NotificationDesktop(invoke: "always", caFile: "/dev/null")
        let confirming = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": true}}"#
        let daemon = try DaemonProcess(
            providers: ["mock.json": confirming],
            logLevel: "info",
            environment: desktop.environment.merging(["AUTHGATE_ASKPASS": "", "SSH_ASKPASS": ""]) { _, new in new }
        )
        try daemon.signIn()
        let first = try daemon.cli(["token", "mock"])
        #expect(first.status == 0, "\(first.stderr)")
        let question = try #require(desktop.notifications.first)
        #expect(
            question["actions"] as? [String: String]
                == ["once": "Allow once", "running": "Allow while it runs", "always": "Always allow", "deny": "Deny"],
            "\(question)"
        )
        // The CLI was run by this test process: the question is about the program that ran it.
        let runner = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        #expect((question["summary"] as? String)?.hasPrefix("Allow \(runner) (pid \(getpid())") == true, "\(question)")
        #expect(!"\(question)".contains(first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        #expect(desktop.notifications.count == 1, "always: not asked again")
    }

    @Test("no session bus: --notify shows nothing and says nothing alarming; the session still ends as before", NotificationTests.needsDesktop)
    func noSessionBus() throws {
        let scratch = try ScratchDirectory()
        let (server, desktop, daemon) = try signedIn(scratch, withBus: false, logLevel: "debug")
        try daemon.waitForLog("--notify: no session bus, so no notifications")
        try server.setMode("refresh_refused")
        try eventually(timeout: .seconds(20)) { try state(daemon) == "login_required" }
        #expect(desktop.notifications.isEmpty)
        #expect(!daemon.logText.contains("notify-send") && !daemon.logText.contains("notified"), "\(daemon.logText)")
    }
}
