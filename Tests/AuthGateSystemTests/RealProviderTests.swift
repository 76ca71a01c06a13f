import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A provider file for the real authorization server, with its CA.
private func oidcProvider(
    _ server: LoopbackServer,
    client: String = "authgate-password",
    grants: [String] = ["password"],
    extra: String = ""
) -> String {
    #"""
    {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "\#(client)", "grants": \#(grants),
     "scopes": ["openid", "profile", "email"], "tls": {"ca_file": "\#(server.caFile)"},
     "endpoints": {"revocation": "\#(server.endpoints["revocation"] ?? "")"}\#(extra)}
    """#
}

/// The server's userinfo endpoint called directly with `token`: the HTTP status.
private func userinfoStatus(_ server: LoopbackServer, token: String) throws -> String {
    try run(
        URL(fileURLWithPath: "/usr/bin/curl"),
        [
            "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", server.caFile,
            "-H", "Authorization: Bearer \(token)", server.endpoints["userinfo"] ?? "",
        ]
    ).stdout
}

/// authgated against a real OAuth 2.0 / OpenID Connect server (django-oauth-toolkit on
/// loopback over TLS), driven through its socket and the CLI.
@Suite("A real authorization server", .serialized)
struct RealProviderTests {
    @Test("password sign-in, token reuse, userinfo, wrong and empty passwords, logout revokes at the server")
    func passwordGrant() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: ["corp.json": oidcProvider(server)])
        try daemon.waitForLog("provider ready")

        let listed = try daemon.cli(["providers", "--json"])
        #expect(listed.stdout.contains(#""status":"ready""#))

        let login = try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.hasPrefix("Signed in to corp as "))

        let token = try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .newlines)
        #expect(!token.isEmpty)
        #expect(try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .newlines) == token, "reused while valid")
        #expect(try userinfoStatus(server, token: token) == "200", "the server accepts the token")

        let userinfo = try daemon.cli(["userinfo", "corp", "--json"])
        #expect(userinfo.status == 0, "\(userinfo.stderr)")
        #expect(userinfo.stdout.contains(#""sub":"#))

        let wrong = try daemon.cli(["login", "corp", "--session", "other", "--username", "alice", "--password-stdin"], stdin: "nope\n")
        #expect(wrong.status == 4)
        #expect(wrong.stderr.contains("[invalid_credentials]"))
        let empty = try daemon.cli(["login", "corp", "--session", "other", "--username", "alice", "--password-stdin"], stdin: "\n")
        #expect(empty.status == 5)
        #expect(empty.stderr.contains("[validation_failed]"))

        #expect(try daemon.cli(["logout", "corp"]).status == 0)
        #expect(try userinfoStatus(server, token: token) == "401", "logout revoked the tokens at the server")
        #expect(try daemon.cli(["token", "corp"]).status == 3)

        for secret in ["alice-password-1", token] {
            #expect(!daemon.logText.contains(secret))
        }
    }

    @Test("short-lived tokens are refreshed, and each rotated refresh token is stored before use")
    func refreshRotation() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", accessTokenLifetime: 5)
        let daemon = try DaemonProcess(providers: ["corp.json": oidcProvider(server)])
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        var tokens: [String] = []
        // Every call refreshes (5 s tokens, refreshed in the background too). The server rotates
        // refresh tokens and refuses a spent one, so this works only when each new refresh
        // token was kept. (Asking more validity than the tokens have no longer refreshes per
        // call: docs/DAEMON.md, "A minimum validity the provider cannot meet".)
        for _ in 0..<3 {
            let result = try daemon.cli(["token", "corp", "--force-refresh"])
            #expect(result.status == 0, "\(result.stderr)")
            tokens.append(result.stdout)
        }
        #expect(Set(tokens).count == 3)
        #expect(try userinfoStatus(server, token: tokens[2].trimmingCharacters(in: .newlines)) == "200")
    }

    @Test("client credentials: a service's own token, re-acquired rather than refreshed", arguments: ["client_secret_basic", "client_secret_post"])
    func clientCredentials(_ clientAuth: String) throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let secretFile = server.secretFile(client: "authgate-service")
        let service = #"""
            {"type": "oauth2", "endpoints": {"token": "\#(server.endpoints["token"] ?? "")"}, "client_id": "authgate-service",
             "client_secret_file": "\#(secretFile)", "client_auth": "\#(clientAuth)", "grants": ["client_credentials"], "scopes": ["read"], "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        let daemon = try DaemonProcess(providers: ["svc.json": service])
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "svc", "--client-credentials"])
        #expect(login.status == 0, "\(login.stderr)")
        let first = try daemon.cli(["token", "svc"]).stdout
        let second = try daemon.cli(["token", "svc", "--force-refresh"]).stdout
        #expect(!first.isEmpty && first != second)
        let secret = try String(contentsOfFile: secretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!daemon.logText.contains(secret))
    }

    @Test(
        "a service's provider (client credentials only) signs in on first use: sink, token and helpers with no login, one sign-in for 8 concurrent first callers, login without --client-credentials asks no user name, logout then token signs in anew; no message says to run authgate login"
    )
    func clientCredentialsOnFirstUse() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let secretFile = server.secretFile(client: "authgate-service")
        let service = #"""
            {"type": "oauth2", "endpoints": {"token": "\#(server.endpoints["token"] ?? "")"}, "client_id": "authgate-service",
             "client_secret_file": "\#(secretFile)", "grants": ["client_credentials"], "scopes": ["read"], "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        let daemon = try DaemonProcess(providers: ["svc.json": service])
        try daemon.waitForLog("provider ready")
        var outputs: [ProcessOutput] = []
        // The daemon's log reaches the test through a pipe a moment after an answer: wait until
        // at least `expected` sign-ins are there, then count them exactly.
        func firstUses(atLeast expected: Int) -> Int {
            let count = { daemon.logText.components(separatedBy: "signed in on first use").count - 1 }
            try? eventually(timeout: .seconds(5)) { count() >= expected }
            return count()
        }

        // The sink (token.watch) on a daemon nobody signed in to.
        let file = scratch.path + "/token"
        let sink = try daemon.cli(["sink", "svc", "--file", file, "--once"])
        outputs.append(sink)
        #expect(sink.status == 0, "\(sink)")
        let written = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .newlines)
        let token = try daemon.cli(["token", "svc"])
        outputs.append(token)
        #expect(token.status == 0 && token.stdout == written + "\n", "the session the sink's first use made")
        #expect(firstUses(atLeast: 1) == 1)

        // Eight first callers of another session at once: one sign-in.
        let callers = try (0..<8).map { _ in try daemon.backgroundCLI(["token", "svc", "--session", "burst"]) }
        for caller in callers { #expect(try caller.waitForExit() == 0, "\(caller.stderr)") }
        #expect(Set(callers.map(\.stdout)).count == 1 && callers[0].stdout != token.stdout, "one token for all eight")
        let afterBurst = firstUses(atLeast: 2)
        #expect(afterBurst == 2, "single flight: \(afterBurst) sign-ins")

        // login with no flag: the client credentials grant, no user name asked (no terminal here).
        let login = try daemon.cli(["login", "svc", "--session", "manual"])
        outputs.append(login)
        #expect(login.status == 0 && login.stdout.contains("Signed in to svc"), "\(login)")
        // Signed out, the next token signs in anew.
        #expect(try daemon.cli(["logout", "svc"]).status == 0)
        let again = try daemon.cli(["token", "svc"])
        outputs.append(again)
        #expect(again.status == 0 && again.stdout != token.stdout, "\(again)")
        #expect(firstUses(atLeast: 3) == 3)
        for output in outputs + callers.map({ ProcessOutput(status: 0, stdout: $0.stdout, stderr: $0.stderr) }) {
            #expect(!output.stderr.contains("authgate login"), "\(output.stderr)")
        }
        let secret = try String(contentsOfFile: secretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!daemon.logText.contains(secret))
    }

    @Test("server down: network_error, unreachable, then ready again by itself when it returns")
    func outage() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let port = server.port
        let provider = oidcProvider(server)
        server.stop()

        let daemon = try DaemonProcess(providers: ["corp.json": provider])
        try daemon.waitForLog("provider unreachable")
        let down = try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(down.status == 7)
        #expect(down.stderr.contains("[network_error]"))

        let restarted = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", port: port)
        try daemon.waitForLog("provider ready", timeout: .seconds(40))
        #expect(try daemon.cli(["providers", "--json"]).stdout.contains(#""status":"ready""#))
        let up = try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(up.status == 0, "\(up.stderr)")
        _ = restarted
    }
}
