import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon trusts of a provider and its files: secret and CA files, ID tokens on
/// refresh, answers during an outage, the scopes a client asks for.
@Suite("Providers: trusted files, ID tokens on refresh, outages, client scopes", .serialized)
struct ProviderTrustTests {
    // MARK: Files

    @Test("a secret file in a directory others can write is refused, naming the directory; /tmp's sticky root directory is fine")
    func directoryAboveSecret() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path + "/idp", mode: "ok")
        let open = scratch.path + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: false)
        chmod(open, 0o777)
        try "s3cret-client\n".write(toFile: open + "/secret", atomically: false, encoding: .utf8)
        chmod(open + "/secret", 0o600)
        let providers = scratch.path + "/providers.d"
        try FileManager.default.createDirectory(atPath: providers, withIntermediateDirectories: false)
        try faultyProviderFile(server, grants: #"["client_credentials"]"#, extra: #", "client_secret_file": "\#(open)/secret""#)
            .write(toFile: providers + "/faulty.json", atomically: false, encoding: .utf8)
        let check = try run(BuiltProducts.daemon, ["--check", "--providers", providers])
        #expect(
            check.stdout.contains("refused: the directory \(open) above the secret file \(open)/secret is writable by everyone (mode 0777)"),
            "\(check.stdout)"
        )
        // Sticky and root's, like /tmp itself: others cannot replace the file.
        chmod(open, 0o1777)
        if getuid() == 0 {
            let sticky = try run(BuiltProducts.daemon, ["--check", "--providers", providers])
            #expect(!sticky.stdout.contains("refused"), "\(sticky.stdout)")
        }
    }

    @Test("the CA bundle is read once, at validation: a CA file changed afterwards is not what curl trusts")
    func caBundleInMemory() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path + "/idp", mode: "ok")
        let ca = scratch.path + "/ca.pem"
        try FileManager.default.copyItem(atPath: server.caFile, toPath: ca)
        let daemon = try DaemonProcess(providers: [
            "faulty.json": #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
             "tls": {"ca_file": "\#(ca)"}}
            """#
        ])
        try daemon.waitForLog("provider ready")
        try "not a certificate\n".write(toFile: ca, atomically: false, encoding: .utf8)
        let login = try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0, "the bundle read at validation is still trusted: \(login.stderr)")
    }
    // MARK: ID token on refresh

    @Test("an ID token for another user on refresh is refused (server_error) and the session keeps its tokens")
    func idTokenSubjectOnRefresh() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProviderFile(server)])
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        // The name the user knows, not the opaque subject; status keeps the subject.
        #expect(login.stdout.contains("as faulty."), "\(login.stdout)")
        let original = try daemon.cli(["token", "faulty"]).stdout
        try server.setMode("id_token_other_sub")
        let forced = try daemon.cli(["token", "faulty", "--force-refresh"])
        #expect(forced.status == 7 && forced.stderr.contains("[server_error]") && forced.stderr.contains("another user"), "\(forced.stderr)")
        // A narrower token's refresh is held to the same rule.
        let narrower = try daemon.cli(["token", "faulty", "--scope", "openid"])
        #expect(narrower.status == 7 && narrower.stdout.isEmpty && narrower.stderr.contains("another user"), "\(narrower)")
        // Checked while the provider still answers so: once it answers well again, the session's
        // background retry (its backoff is a second or two) refreshes it and clears the error,
        // which made this test fail at random when it switched the provider back first.
        #expect(try daemon.cli(["token", "faulty"]).stdout == original, "the session kept its tokens")
        let status = try daemon.cli(["status", "--json"]).stdout
        #expect(status.contains(#""subject":"faulty-user""#) && status.contains("another user"), "\(status)")
    }
    // MARK: Outage answers

    @Test("force_refresh and token.rejected answer the outage; a plain token call still serves the valid token")
    func outageAnswers() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProviderFile(server)])
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let current = try daemon.cli(["token", "faulty"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try server.setMode("http503")
        let forced = try daemon.cli(["token", "faulty", "--force-refresh"])
        #expect(forced.status == 7 && forced.stdout.isEmpty && forced.stderr.contains("[service_unavailable]"), "\(forced)")
        let rejected = try exchange(
            try daemon.connect(),
            #"{"jsonrpc":"2.0","id":1,"method":"token.rejected","params":{"provider":"faulty","access_token":"\#(current)"}}"#
        )
        #expect(rejected.errorReason == "service_unavailable", "\(rejected)")
        let data = (rejected["error"] as? [String: Any])?["data"] as? [String: Any]
        #expect(data?["retry_after_seconds"] as? Int == 7)
        let plain = try daemon.cli(["token", "faulty"])
        #expect(plain.status == 0 && plain.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == current)
    }
    // MARK: Client-credentials scopes

    @Test("client_credentials sends the file's scopes as written; a refusal names them")
    func clientCredentialsScopes() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let secret = scratch.path + "/secret"
        try "s3cret-client\n".write(toFile: secret, atomically: true, encoding: .utf8)
        chmod(secret, 0o600)
        let daemon = try DaemonProcess(providers: [
            "faulty.json": faultyProviderFile(
                server,
                grants: #"["client_credentials"]"#,
                scopes: #"["openid", "offline_access", "api.read"]"#,
                extra: #", "client_secret_file": "\#(secret)""#
            )
        ])
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "faulty", "--client-credentials"])
        #expect(login.status == 0, "\(login.stderr)")
        let sent = (try server.stats()["last_token_request"] as? [String: Any])?["scope"] as? String
        #expect(sent == "openid offline_access api.read")
        #expect(!daemon.logText.contains("s3cret-client"))
    }
}
