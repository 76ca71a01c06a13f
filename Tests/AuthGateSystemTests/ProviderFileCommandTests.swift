import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// `authgate provider list / add / remove` against the built CLI and daemon: the file written where
/// the daemon reads, checked by the daemon's rules first, and loaded without a restart.
@Suite("authgate provider list/add/remove", .serialized)
struct ProviderFileCommandTests {
    @Test(
        "add: --dry-run prints the file; the password grant's deprecation is warned of; the file is written, loaded and ready without a restart; list shows it with its path and status; no overwrite without --force; an invalid file is never written; remove asks, then deletes and unloads"
    )
    func addAndRemove() throws {
        let scratch = try ScratchDirectory()
        // django-oauth-toolkit (Tests/idp/launch.py) with its public password client.
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: [:])
        let directory = daemon.providersDirectory
        let file = directory + "/corp.json"
        let add = [
            "provider", "add", "corp", "--providers-dir", directory, "--issuer", server.issuer, "--client-id", "authgate-password",
            "--grant", "password", "--scope", "openid", "--ca-file", server.caFile, "--storage", "persistent",
        ]

        let dryRun = try daemon.cli(add + ["--dry-run"])
        #expect(dryRun.status == 0, "\(dryRun.stderr)")
        let proposed = try #require(try JSONSerialization.jsonObject(with: Data(dryRun.stdout.utf8)) as? [String: Any], "\(dryRun.stdout)")
        #expect(proposed["issuer"] as? String == server.issuer && proposed["type"] as? String == "oidc" && proposed["storage"] as? String == "persistent")
        #expect((proposed["tls"] as? [String: Any])?["ca_file"] as? String == server.caFile)
        #expect(!FileManager.default.fileExists(atPath: file), "--dry-run writes nothing")
        // Discovery ran in the daemon; what the provider offers goes to standard error with --dry-run.
        #expect(dryRun.stderr.contains(server.issuer + " offers:") && dryRun.stderr.contains("PKCE methods:"), "\(dryRun.stderr)")

        let added = try daemon.cli(add)
        #expect(added.status == 0, "\(added.stdout) \(added.stderr)")
        #expect(added.stdout.contains("corp is ready"), "\(added.stdout)")
        #expect(!added.stdout.contains("Sessions stay in memory"), "a persistent provider's sessions are on disk")
        // Without --storage: what memory means is said, and persistent offered.
        let inMemory = try daemon.cli(
            ["provider", "add", "corpmem", "--providers-dir", directory, "--issuer", server.issuer, "--client-id", "authgate-password"]
                + ["--grant", "password", "--scope", "openid", "--ca-file", server.caFile]
        )
        #expect(
            inMemory.status == 0 && inMemory.stdout.contains("Sessions stay in memory: kept across a restart or an upgrade of the daemon")
                && inMemory.stdout.contains("--storage persistent"),
            "\(inMemory.stdout) \(inMemory.stderr)"
        )
        #expect(try daemon.cli(["provider", "remove", "corpmem", "--providers-dir", directory, "--yes"]).status == 0)
        #expect(added.stdout.contains(server.issuer + " offers:") && added.stdout.contains("registration endpoint:   none"), "\(added.stdout)")
        // The daemon's warning about the password grant, said where the admin chose it.
        let passwordWarning = "warning: \(file): $.grants: the password grant is deprecated by the OAuth 2.0 Security Best Current Practice (RFC 9700 §2.4)"
        #expect(added.stderr.contains(passwordWarning) && dryRun.stderr.contains(passwordWarning), "\(added.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == dryRun.stdout, "the file is what --dry-run showed")
        #expect(try daemon.cli(["providers", "--json"]).stdout.contains(#""status":"ready""#))
        try Data("{".utf8).write(to: URL(fileURLWithPath: directory + "/broken.json"))
        let list = try daemon.cli(["provider", "list", "--providers-dir", directory, "--json"])
        let listings = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]], "\(list.stdout) \(list.stderr)")
        #expect(listings.map { $0["id"] as? String } == ["broken", "corp"])
        #expect(listings.last?["file"] as? String == file && listings.last?["valid"] as? Bool == true && listings.last?["status"] as? String == "ready")
        #expect(listings.first?["valid"] as? Bool == false && listings.first?["status"] == nil, "a file the daemon has not loaded: \(listings)")
        #expect(try daemon.cli(["provider", "list", "--providers-dir", directory]).stdout.contains("error: " + directory + "/broken.json: $: not valid JSON"))
        try FileManager.default.removeItem(atPath: directory + "/broken.json")
        let signIn = try call(try daemon.connect(), "login", ["provider": "corp", "username": "alice", "password": "alice-password-1"])
        #expect(signIn.object["state"] as? String == "authenticated" && signIn.object["subject"] as? String != nil, "\(signIn)")

        let again = try daemon.cli(add.map { $0 == "persistent" ? "memory" : $0 })
        #expect(again.status == 5)
        #expect(again.stderr.contains("[provider_file.exists]") && again.stderr.contains("--force"), "\(again.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == dryRun.stdout, "unchanged")
        let forced = try daemon.cli(add.map { $0 == "persistent" ? "memory" : $0 } + ["--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains(#""storage" : "memory""#))

        let invalid = try daemon.cli([
            "provider", "add", "bad", "--providers-dir", directory, "--issuer", "http://sso.example.com", "--client-id", "a", "--grant", "password",
        ])
        #expect(invalid.status == 5)
        #expect(invalid.stderr.contains("[provider_file.invalid]") && invalid.stderr.contains("$.issuer: must be an https URL"), "\(invalid.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/bad.json"))
        let preset = try daemon.cli([
            "provider", "add", "kc", "--providers-dir", directory, "--preset", "keycloak", "--host", "sso.example.com", "--client-id", "x", "--dry-run",
        ])
        #expect(preset.status == 5 && preset.stderr.contains(#"$.preset_options.realm: required by the "keycloak" preset"#), "\(preset.stderr)")

        let unconfirmed = try daemon.cli(["provider", "remove", "corp", "--providers-dir", directory])
        #expect(unconfirmed.status == 5 && unconfirmed.stderr.contains("[provider_file.unconfirmed]"), "\(unconfirmed.stderr)")
        #expect(FileManager.default.fileExists(atPath: file))
        let removed = try daemon.cli(["provider", "remove", "corp", "--providers-dir", directory, "--yes"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(!(try daemon.cli(["providers", "--json"]).stdout.contains("corp")))
        let missing = try daemon.cli(["provider", "remove", "corp", "--providers-dir", directory, "--yes"])
        #expect(missing.status == 5 && missing.stderr.contains("[provider_file.not_found]"), "\(missing.stderr)")
    }

    @Test(
        "add --issuer: the daemon reads the discovery document and the CLI prints the grants, PKCE methods, DPoP algorithms, PAR, device and registration endpoints and client auth methods; provider.discover refuses a wrong issuer, an untrusted or unreachable server and a bad ca_file with stable reasons"
    )
    func discovery() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: [:])
        let directory = daemon.providersDirectory

        let add = [
            "provider", "add", "idpy", "--providers-dir", directory, "--issuer", server.issuer, "--client-id", "authgate-par",
            "--grant", "authorization_code", "--grant", "device_code", "--scope", "openid", "--ca-file", server.caFile, "--dry-run",
        ]
        // No device endpoint in the discovery document: the device code grant is refused, or
        // takes --device-endpoint; --credential-host fills credential_helper, no JSON by hand.
        let noDevice = try daemon.cli(add)
        #expect(
            noDevice.status == 5 && noDevice.stderr.contains("names no device authorization endpoint") && noDevice.stdout.isEmpty,
            "\(noDevice)"
        )
        let added = try daemon.cli(
            add + [
                "--device-endpoint", server.issuer + "/device", "--credential-host", "git.example.com/org-a", "--credential-host",
                "git.example.com/org-b",
            ]
        )
        #expect(added.status == 0, "\(added.stderr)")
        let file = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: Any])
        #expect((file["endpoints"] as? [String: Any])?["device_authorization"] as? String == server.issuer + "/device", "\(file)")
        let helper = file["credential_helper"] as? [String: Any]
        #expect(helper?["hosts"] as? [String] == ["git.example.com"] && helper?["paths"] as? [String] == ["org-a", "org-b"], "\(file)")
        for line in [
            "PKCE methods:            S256", "DPoP algorithms:         ES256", "PAR endpoint:            \(server.issuer)/",
            "token endpoint auth:     client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt, none",
            "grants:                  authorization_code, refresh_token, password, client_credentials",
            "device endpoint:         none", "registration endpoint:   \(server.issuer)/registration",
            "warning: the provider does not list the device_code grant",
        ] {
            #expect(added.stderr.contains(line), "\(line) in \(added.stderr)")
        }
        #expect(added.stdout.hasPrefix("{"), "standard output is the file alone: \(added.stdout)")

        let offer = try call(try daemon.connect(), "provider.discover", ["issuer": server.issuer, "ca_file": server.caFile]).object
        #expect(offer["issuer"] as? String == server.issuer && offer["require_pushed_authorization_requests"] as? Bool == false)
        #expect(offer["grants"] as? [String] == ["password", "authorization_code", "client_credentials", "jwt_bearer", "token_exchange"], "\(offer)")
        #expect(
            (offer["pushed_authorization_request_endpoint"] as? String)?.hasPrefix(server.issuer) == true
                && offer["registration_endpoint"] as? String == server.issuer + "/registration",
            "\(offer)"
        )
        // The answer is what docs/rpc.schema.json says: its required keys, no other.
        let schemaData = try Data(contentsOf: LoopbackServer.repository.appendingPathComponent("docs/rpc.schema.json"))
        let schema = try #require(
            ((try JSONSerialization.jsonObject(with: schemaData) as? [String: Any])?["$defs"] as? [String: Any])?["provider.discover.result"] as? [String: Any]
        )
        let properties = Set((schema["properties"] as? [String: Any] ?? [:]).keys)
        #expect(Set(offer.keys).isSubset(of: properties) && Set(schema["required"] as? [String] ?? []).isSubset(of: Set(offer.keys)), "\(offer.keys)")

        let refusals: [([String: Any], String, String)] = [
            (["issuer": server.issuer + "/", "ca_file": server.caFile], "validation_failed", "issuer"),
            (["issuer": "http://127.0.0.1:1", "ca_file": server.caFile], "validation_failed", "issuer"),
            (["issuer": server.issuer, "ca_file": "relative.pem"], "validation_failed", "ca_file"),
            (["issuer": server.issuer, "ca_file": scratch.path + "/missing.pem"], "validation_failed", "ca_file"),
            (["issuer": server.issuer], "network_error", ""),
            (["issuer": "https://127.0.0.1:1", "ca_file": server.caFile], "network_error", ""),
        ]
        for (params, reason, field) in refusals {
            let answer = try call(try daemon.connect(), "provider.discover", params)
            #expect(answer.errorReason == reason, "\(params): \(answer)")
            if !field.isEmpty { #expect(String(describing: answer).contains("\"\(field)\""), "\(params): \(answer)") }
        }
        let unreachable = try daemon.cli([
            "provider", "add", "x", "--providers-dir", directory, "--issuer", "https://127.0.0.1:1", "--client-id", "a", "--grant", "password",
        ])
        #expect(unreachable.status != 0 && unreachable.stderr.contains("network_error"), "\(unreachable.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/x.json"), "nothing is written when discovery fails")
    }

}
