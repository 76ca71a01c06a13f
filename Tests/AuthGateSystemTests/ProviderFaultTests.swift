import AuthGateTestSupport
import Foundation
import Testing

/// A provider file for the fault-injecting provider.
private func faultyProvider(_ server: LoopbackServer, totalMilliseconds: Int = 10_000) -> String {
    #"""
    {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
     "tls": {"ca_file": "\#(server.caFile)"}, "timeouts": {"connect_ms": 1000, "total_ms": \#(totalMilliseconds)}}
    """#
}

private let signIn = #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"faulty","username":"alice","password":"alice-password-1"}}"#

/// What a provider does wrong, and what the user must hear: the fault-injecting provider
/// (Tests/idp/faulty.py) misbehaves on demand where a real server will not.
@Suite("Provider faults", .serialized)
struct ProviderFaultTests {
    static let tokenFaults: [(mode: String, reason: String)] = [
        ("http500", "service_unavailable"),
        ("http503", "service_unavailable"),
        ("html_error", "service_unavailable"),
        ("empty_401", "invalid_credentials"),
        ("empty_403", "invalid_credentials"),
        ("invalid_grant", "invalid_credentials"),
        ("invalid_client", "provider_unavailable"),
        ("truncated", "server_error"),
        ("huge", "server_error"),
        ("wrong_types", "server_error"),
        ("not_json", "server_error"),
        ("slow", "service_unavailable"),
        ("id_token_bad_signature", "server_error"),
        ("id_token_wrong_aud", "server_error"),
        ("id_token_expired", "server_error"),
        ("id_token_unknown_kid", "server_error"),
        ("id_token_alg_none", "server_error"),
        ("id_token_hs256", "server_error"),
        ("id_token_not_jwt", "server_error"),
        ("injected_token", "server_error"),
    ]

    @Test("each token-endpoint fault gets its reason and a sentence; nothing leaks")
    func tokenFaults() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok", delay: 3)
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server, totalMilliseconds: 1500)])
        try daemon.waitForLog("provider ready")
        let connection = try daemon.connect()
        let ok = try exchange(connection, signIn)
        #expect((ok.result as? [String: Any])?["subject"] as? String == "faulty-user", "the ID token was verified: \(ok)")

        for (mode, reason) in Self.tokenFaults {
            try server.setMode(mode)
            let reply = try exchange(connection, signIn)
            #expect(reply.errorReason == reason, "\(mode): \(reply)")
            let message = reply.errorMessage ?? ""
            #expect(message.hasSuffix("."), "\(mode): \(message)")
            #expect(reason == "invalid_credentials" || message.contains("faulty"), "names the provider: \(mode): \(message)")
            #expect(!message.contains("faulty-at-") && !message.contains("faulty-rt-") && !message.contains("<html"), "\(mode): \(message)")
            switch mode {
            case "id_token_alg_none": #expect(message.contains("algorithm \"none\""), "\(message)")
            case "id_token_hs256": #expect(message.contains("algorithm \"HS256\""), "\(message)")
            case "id_token_not_jwt": #expect(message.contains("not a signed JWT"), "\(message)")
            default: break
            }
            if mode == "http503" {
                let data = (reply["error"] as? [String: Any])?["data"] as? [String: Any]
                #expect(data?["retry_after_seconds"] as? Int == 7)
            }
        }
        #expect(!daemon.logText.contains("alice-password-1") && !daemon.logText.contains("faulty-at-") && !daemon.logText.contains("faulty-rt-"))
    }

    /// Execs its arguments with the kernel's memory-deny-write-execute on (`PR_SET_MDWE`,
    /// refusing a mapping that is or becomes writable and executable; kept across exec): what
    /// the system unit's `MemoryDenyWriteExecute=true` asks of the daemon, without systemd.
    static let denyWriteExecute = [
        "/usr/bin/python3", "-c",
        "import ctypes, os, sys\nif ctypes.CDLL(None).prctl(65, 1, 0, 0, 0) != 0: sys.exit('PR_SET_MDWE refused')\nos.execv(sys.argv[1], sys.argv[1:])",
    ]

    @Test(
        "under memory-deny-write-execute, as its unit runs it, the daemon opens libcurl on its first provider request and signs in over TLS"
    )
    func libcurlUnderDenyWriteExecute() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)], launcher: Self.denyWriteExecute)
        try daemon.waitForLog("provider ready")
        let reply = try exchange(try daemon.connect(), signIn)
        #expect((reply.result as? [String: Any])?["subject"] as? String == "faulty-user", "\(reply) \(daemon.logText.suffix(600))")
    }

    @Test("an unknown kid makes the daemon fetch the JWKS once more, then fail")
    func unknownKidRefetch() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "id_token_unknown_kid")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)])
        try daemon.waitForLog("provider ready")
        let before = try server.requestCount("GET /jwks")
        let reply = try exchange(try daemon.connect(), signIn)
        #expect(reply.errorReason == "server_error")
        #expect(reply.errorMessage?.contains("a key the provider does not publish") == true)
        #expect(try server.requestCount("GET /jwks") == before + 1)
    }

    @Test(
        "a JWKS whose only key has no kid (RFC 7517 makes it optional) is usable: the provider is ready and an ID token naming no kid is verified with that key"
    )
    func keyWithoutKid() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "no_kid")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)])
        try daemon.waitForLog("provider ready")
        let reply = try exchange(try daemon.connect(), signIn)
        #expect((reply.result as? [String: Any])?["subject"] as? String == "faulty-user", "the ID token was verified: \(reply)")
    }

    @Test("empty fields are refused before any request reaches the provider")
    func noRequestForEmptyFields() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)])
        try daemon.waitForLog("provider ready")
        let reply = try exchange(
            try daemon.connect(),
            #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"faulty","username":"alice","password":""}}"#
        )
        #expect(reply.errorReason == "validation_failed")
        #expect(try server.requestCount("POST /token") == 0)
    }

    @Test("a refused refresh clears the session: login_required")
    func refusedRefresh() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)])
        try daemon.waitForLog("provider ready")
        let connection = try daemon.connect()
        #expect(try exchange(connection, signIn).result != nil)
        try server.setMode("invalid_grant")
        let reply = try exchange(connection, #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"faulty","force_refresh":true}}"#)
        #expect(reply.errorReason == "login_required")
        let status = try daemon.cli(["status", "--json"])
        #expect(status.stdout.contains(#""state":"login_required""#))
        #expect(try daemon.cli(["token", "faulty"]).status == 3)
    }

    @Test("a discovery document naming another issuer makes the provider invalid")
    func issuerMismatch() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "issuer_mismatch")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)])
        try daemon.waitForLog("provider invalid")
        let list = try daemon.cli(["providers", "--json"]).stdout
        #expect(list.contains(#""status":"invalid""#))
        #expect(list.contains("names the issuer"))
        let reply = try exchange(try daemon.connect(), signIn)
        #expect(reply.errorReason == "provider_unavailable")
    }

    @Test("discovery answering 500 leaves the provider unreachable, retried until it recovers")
    func discoveryRecovers() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "discovery_500")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProvider(server)])
        try daemon.waitForLog("provider unreachable")
        #expect(try daemon.cli(["providers", "--json"]).stdout.contains(#""status":"unreachable""#))
        try server.setMode("ok")
        try daemon.waitForLog("provider ready", timeout: .seconds(20))
        #expect(try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
    }

    @Test("discovery metadata is advisory: a grant it does not list is a warning")
    func advisoryMetadata() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let provider = faultyProvider(server).replacingOccurrences(of: #""grants": ["password"]"#, with: #""grants": ["password", "authorization_code"]"#)
        let directory = try ScratchDirectory()
        try directory.write("faulty.json", provider)
        let check = try run(BuiltProducts.daemon, ["--check", "--providers", directory.path])
        #expect(check.status == 0, "\(check.stdout)")
        #expect(check.stdout.contains("discovery does not list the authorization_code grant"))
    }
}

extension LoopbackServer {
    /// How many requests the faulty provider got for "METHOD /path".
    func requestCount(_ key: String) throws -> Int {
        let stats = try stats()
        return ((stats["requests"] as? [String: Any])?[key] as? Int) ?? 0
    }
}
