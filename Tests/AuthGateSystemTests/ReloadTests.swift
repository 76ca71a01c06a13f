import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A mock provider file whose display name tells versions apart.
private func mock(_ name: String) -> String {
    #"{"type": "mock", "display_name": "\#(name)", "users": [{"username": "demo", "password": "demo-password-1"}]}"#
}

/// The `config.reload` result, provider by provider.
private func reload(_ daemon: DaemonProcess) throws -> [String: [String: Any]] {
    let result = try daemon.cli(["reload", "--json"])
    #expect(result.status == 0, "\(result.stderr)")
    let reports = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
    return Dictionary(uniqueKeysWithValues: reports.map { ($0["id"] as? String ?? "", $0) })
}

/// Live reload of `providers.d`, through `config.reload` (the CLI's `reload`) and SIGHUP.
@Suite("Live reload")
struct ReloadTests {
    @Test("added providers appear, removed ones go with their sessions, changed and unchanged ones keep theirs")
    func addRemoveChange() throws {
        let daemon = try DaemonProcess(providers: ["a.json": mock("A"), "b.json": mock("B"), "c.json": mock("C")])
        for provider in ["a", "b", "c"] { try daemon.signIn(provider) }
        let tokenA = try daemon.cli(["token", "a"]).stdout
        let tokenC = try daemon.cli(["token", "c"]).stdout

        let directory = daemon.providersDirectory
        try FileManager.default.removeItem(atPath: directory + "/b.json")
        try Data(mock("C, renamed").utf8).write(to: URL(fileURLWithPath: directory + "/c.json"))
        try Data(mock("D").utf8).write(to: URL(fileURLWithPath: directory + "/d.json"))

        let report = try reload(daemon)
        #expect(report["a"]?["change"] as? String == "unchanged")
        #expect(report["b"]?["change"] as? String == "removed")
        #expect(report["b"]?["status"] == nil)
        #expect(report["c"]?["change"] as? String == "changed")
        #expect(report["c"]?["status"] as? String == "ready")
        #expect(report["d"]?["change"] as? String == "added")
        #expect(report["d"]?["status"] as? String == "ready")

        #expect(try daemon.cli(["token", "a"]).stdout == tokenA, "unchanged: the session is untouched")
        #expect(try daemon.cli(["token", "c"]).stdout == tokenC, "changed, same issuer and client: the session is kept")
        let removed = try daemon.cli(["token", "b"])
        #expect(removed.status != 0)
        #expect(removed.stderr.contains("[unknown_provider]"))
        #expect(try daemon.cli(["token", "d"]).status == 3)
        let status = try daemon.cli(["status", "--json"]).stdout
        #expect(!status.contains(#""provider":"b""#), "the removed provider's session is signed out")
        let listed = try daemon.cli(["providers", "--json"]).stdout
        #expect(listed.contains("C, renamed"))
    }

    @Test("a file that becomes invalid is reported and unusable, keeps its sessions, and works again once fixed")
    func invalidThenFixed() throws {
        let daemon = try DaemonProcess(providers: ["a.json": mock("A")])
        try daemon.signIn("a")
        let token = try daemon.cli(["token", "a"]).stdout
        let file = URL(fileURLWithPath: daemon.providersDirectory + "/a.json")

        try Data(#"{"type": "mock", "users": [], "latency": 3}"#.utf8).write(to: file)
        let broken = try reload(daemon)
        #expect(broken["a"]?["change"] as? String == "changed")
        #expect(broken["a"]?["status"] as? String == "invalid")
        #expect((broken["a"]?["problems"] as? [String])?.contains { $0.contains("$.latency") } == true)
        let refused = try daemon.cli(["token", "a"])
        #expect(refused.status == 6)
        #expect(refused.stderr.contains("[provider_unavailable]"))

        try Data(mock("A").utf8).write(to: file)
        #expect(try reload(daemon)["a"]?["status"] as? String == "ready")
        #expect(try daemon.cli(["token", "a"]).stdout == token, "a typo signed nobody out")
    }

    @Test("SIGHUP reloads too")
    func hangup() throws {
        let daemon = try DaemonProcess(providers: ["a.json": mock("A")])
        try Data(mock("E").utf8).write(to: URL(fileURLWithPath: daemon.providersDirectory + "/e.json"))
        daemon.send(SIGHUP)
        try daemon.waitForLog("providers reloaded: 1 added, 0 removed, 0 changed, 1 unchanged")
        #expect(try daemon.cli(["providers", "--json"]).stdout.contains(#""id":"e""#))
        #expect(daemon.isRunning)
    }

    @Test(
        "only admins may reload",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv to run a client as another uid")
    )
    func adminOnly() throws {
        let daemon = try DaemonProcess(providers: ["a.json": mock("A")], arguments: ["--socket-group", "nogroup"])
        chmod(daemon.scratch.path, 0o755)
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        let refused = try daemon.cli(["reload"], prefix: asNobody)
        #expect(refused.status == 8)
        #expect(refused.stderr.contains("[permission_denied]"))
        #expect(!daemon.logText.contains("providers reloaded"))
    }

    @Test("a changed provider keeps its sessions only while issuer and client stay the same")
    func changedIdentity() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        func provider(client: String, name: String, secret: String? = nil) -> String {
            #"""
            {"type": "oidc", "display_name": "\#(name)", "issuer": "\#(server.issuer)", "client_id": "\#(client)",
             "grants": ["password"], "scopes": ["openid"], "tls": {"ca_file": "\#(server.caFile)"}\#(secret.map { #", "client_secret_file": "\#($0)""# } ?? "")}
            """#
        }
        let daemon = try DaemonProcess(providers: ["corp.json": provider(client: "authgate-password", name: "Corp")])
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let token = try daemon.cli(["token", "corp"]).stdout
        let file = URL(fileURLWithPath: daemon.providersDirectory + "/corp.json")

        try Data(provider(client: "authgate-password", name: "Corp SSO").utf8).write(to: file)
        #expect(try reload(daemon)["corp"]?["status"] as? String == "ready")
        #expect(try daemon.cli(["token", "corp"]).stdout == token)

        let secretFile = server.secretFile(client: "authgate-confidential-password")
        try Data(provider(client: "authgate-confidential-password", name: "Corp SSO", secret: secretFile).utf8).write(to: file)
        let report = try reload(daemon)
        #expect(report["corp"]?["change"] as? String == "changed")
        #expect(report["corp"]?["status"] as? String == "ready")
        #expect(try daemon.cli(["token", "corp"]).status == 3, "another client: the session was signed out")
        try daemon.waitForLog("signed out: the provider now has another issuer or client", timeout: .seconds(10))
        let login = try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0, "the new client works: \(login.stderr)")
    }
}
