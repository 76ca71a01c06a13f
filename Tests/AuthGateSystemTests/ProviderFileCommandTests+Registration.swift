import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate provider add --register`: dynamic client registration (RFC 7591) through the CLI.
extension ProviderFileCommandTests {
    @Test(
        "add --register: RFC 7591 registration at idpyoidc through the daemon, the provider ready, a browser sign-in through the registered client (public, and private_key_jwt with a generated key); remove deletes the client at the provider (RFC 7592), after which its token requests are invalid_client; a refused delete keeps the files; secrets never printed or logged"
    )
    func register() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: [:])
        let directory = daemon.providersDirectory
        let file = directory + "/idpy.json"
        let registrationFile = directory + "/idpy.registration"
        let add = [
            "provider", "add", "idpy", "--providers-dir", directory, "--issuer", server.issuer, "--register", "--scope", "openid", "--scope", "profile",
            "--scope", "email", "--ca-file", server.caFile,
        ]

        let dryRun = try daemon.cli(add + ["--dry-run"])
        #expect(dryRun.status == 0 && dryRun.stderr.contains("--dry-run registers nothing"), "\(dryRun.stderr)")
        #expect(dryRun.stdout.contains(#""client_id" : "registered-by-provider-add""#), "\(dryRun.stdout)")
        #expect(try server.idpyStats()["registrations"] as? Int == 0 && !FileManager.default.fileExists(atPath: file))

        let added = try daemon.cli(add)
        #expect(added.status == 0, "\(added.stdout) \(added.stderr)")
        #expect(added.stdout.contains("Registered the client ") && added.stdout.contains("idpy is ready"), "\(added.stdout)")
        let provider = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        let clientID = try #require(provider["client_id"] as? String)
        #expect(provider["grants"] as? [String] == ["authorization_code"] && provider["client_secret_file"] == nil, "a public client: \(provider)")
        let record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: registrationFile))) as? [String: Any])
        let accessToken = try #require(record["registration_access_token"] as? String)
        #expect(record["client_id"] as? String == clientID && (record["registration_client_uri"] as? String)?.hasPrefix(server.issuer) == true)
        #expect(try FileManager.default.attributesOfItem(atPath: registrationFile)[.posixPermissions] as? Int == 0o600)
        #expect(!(try String(contentsOfFile: file, encoding: .utf8)).contains("registration"), "the provider file holds no registration secret")
        #expect(!added.stdout.contains(accessToken) && !added.stderr.contains(accessToken))
        let again = try daemon.cli(add)
        #expect(again.status == 5 && again.stderr.contains("[provider_file.exists]"), "\(again.stderr)")
        #expect(try server.idpyStats()["registrations"] as? Int == 1, "nothing is registered for a file that would not be written")
        for wrong in [["--client-id", "x"], ["--initial-access-token-file", "/nonexistent"]] {
            let usage = try daemon.cli(
                (wrong.first == "--client-id" ? add : add.filter { $0 != "--register" }) + wrong + ["--dry-run"]
            )
            #expect(usage.status == 64 && usage.stderr.contains("--register"), "\(wrong): \(usage.stderr)")
        }
        // An initial access token where registration is open (idpyoidc refuses any Bearer token); an empty token file.
        let tokenFile = scratch.path + "/initial-access-token"
        try "initial-access-cli-secret\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let withToken = try daemon.cli(add.map { $0 == "idpy" ? "third" : $0 } + ["--initial-access-token-file", tokenFile])
        #expect(
            withToken.status == 6 && withToken.stderr.contains("refused the initial access token") && withToken.stderr.contains("[registration_refused]"),
            "\(withToken.stderr)"
        )
        #expect(!withToken.stdout.contains("initial-access-cli-secret") && !withToken.stderr.contains("initial-access-cli-secret"))
        try "\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let emptyToken = try daemon.cli(add.map { $0 == "idpy" ? "third" : $0 } + ["--initial-access-token-file", tokenFile])
        #expect(emptyToken.status == 5 && emptyToken.stderr.contains("[provider_file.unreadable]"), "\(emptyToken.stderr)")
        // Not through a link, and not a device or FIFO that never ends.
        try "initial-access-cli-secret\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: tokenFile + ".link", withDestinationPath: tokenFile)
        for unreadable in [tokenFile + ".link", "/dev/zero"] {
            let refused = try daemon.cli(add.map { $0 == "idpy" ? "third" : $0 } + ["--initial-access-token-file", unreadable])
            #expect(refused.status == 5 && refused.stderr.contains("not a link) or is empty. [provider_file.unreadable]"), "\(unreadable): \(refused.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/third.json"))

        // A provider that demands an initial access token (the server's initial-access-token
        // mode, as Keycloak's client registration does): refused without it and with another
        // one, registered with it; the token is never printed or logged.
        let mode = try run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sS", "--fail", "--cacert", server.caFile, "-d", "mode=initial-access-token", server.issuer + "/test/mode"]
        )
        let initialAccessToken = try #require((try JSONSerialization.jsonObject(with: Data(mode.stdout.utf8)) as? [String: Any])?["nonce"] as? String)
        let gated = add.map { $0 == "idpy" ? "gated" : $0 }
        let withoutToken = try daemon.cli(gated)
        #expect(
            withoutToken.status == 6 && withoutToken.stderr.contains("demands an initial access token")
                && withoutToken.stderr.contains("--initial-access-token-file") && withoutToken.stderr.contains("[registration_refused]"),
            "\(withoutToken.stderr)"
        )
        try "initial-access-cli-secret\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let wrongToken = try daemon.cli(gated + ["--initial-access-token-file", tokenFile])
        #expect(wrongToken.status == 6 && wrongToken.stderr.contains("refused the initial access token"), "\(wrongToken.stderr)")
        try (initialAccessToken + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let rightToken = try daemon.cli(gated + ["--initial-access-token-file", tokenFile])
        #expect(rightToken.status == 0 && rightToken.stdout.contains("Registered the client "), "\(rightToken.stdout) \(rightToken.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory + "/gated.json") && FileManager.default.fileExists(atPath: directory + "/gated.registration"))
        #expect(try server.idpyStats()["registrations"] as? Int == 2, "one registration: the one with the token")
        for output in [withoutToken, wrongToken, rightToken] {
            #expect(!output.stdout.contains(initialAccessToken) && !output.stderr.contains(initialAccessToken))
        }
        #expect(!daemon.logText.contains(initialAccessToken) && !daemon.logText.contains("initial-access-cli-secret"))
        try server.setIdpyMode("normal")

        // Asked for more than the provider registers (idpyoidc drops the device code grant):
        // the file lists what was granted.
        let partial = try daemon.cli(
            add.map { $0 == "idpy" ? "partial" : $0 } + [
                "--grant", "authorization_code", "--grant", "device_code", "--device-endpoint", server.issuer + "/device",
            ]
        )
        #expect(
            partial.status == 0 && partial.stdout.contains("Left out of the file, as the provider did not grant them: device_code."),
            "\(partial.stdout) \(partial.stderr)"
        )
        let partialFile = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/partial.json"))) as? [String: Any]
        )
        #expect(partialFile["grants"] as? [String] == ["authorization_code"], "\(partialFile)")
        // --force over it: a new client, and the earlier one deleted at the provider.
        let replaced = try daemon.cli(add.map { $0 == "idpy" ? "partial" : $0 } + ["--force"])
        let earlierClient = try #require(partialFile["client_id"] as? String)
        #expect(
            replaced.status == 0 && replaced.stdout.contains("Deleted the earlier client \(earlierClient) at the provider."),
            "\(replaced.stdout) \(replaced.stderr)"
        )
        #expect(try server.idpyStats()["deregistrations"] as? Int == 1)
        let replacedFile = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/partial.json"))) as? [String: Any]
        #expect((replacedFile?["client_id"] as? String).map { $0 != earlierClient } == true, "\(String(describing: replacedFile))")

        // A browser sign-in through the registered client (idpyoidc signs alice in at once).
        func browserSignIn(_ provider: String, client: String) throws {
            let login = try daemon.backgroundCLI(["login", provider, "--browser", "--no-browser"])
            let url = try Interactive.approveInBrowser(login, server)
            #expect(URLComponents(string: url)?.queryItems?.first { $0.name == "client_id" }?.value == client, "\(url)")
            #expect(try login.waitForExit() == 0, "\(login.stderr)")
            #expect(try daemon.cli(["token", provider]).status == 0)
        }
        try browserSignIn("idpy", client: clientID)
        #expect((try server.idpyStats()["client_auth"] as? [String: Any])?[clientID] as? String == "none")
        // `provider test` through the registered client: every check it can make passes (this
        // test server has no revocation endpoint: not applicable).
        let test = try daemon.backgroundCLI(["provider", "test", "idpy", "--browser", "--no-browser", "--json"])
        try Interactive.approveInBrowser(test, server)
        #expect(try test.waitForExit() == 0, "\(test.stdout)\n\(test.stderr)")
        let report = try JSONDecoder().decode(ProviderTestReport.self, from: Data(test.stdout.utf8))
        let failed = report.checks.filter { $0.outcome == .fail }.map(\.name)
        let passed = Set(report.checks.filter { $0.outcome == .pass }.map(\.name))
        #expect(report.passed && failed.isEmpty, "\(test.stdout)")
        #expect(passed.isSuperset(of: ["sign_in", "id_token", "claims", "scopes", "refresh_token", "refresh", "userinfo"]), "\(test.stdout)")

        // A token request for the client: known (a bogus code is invalid_grant), later unknown.
        func tokenError() throws -> String {
            let answer = try run(
                URL(fileURLWithPath: "/usr/bin/curl"),
                [
                    "-sS", "--cacert", server.caFile, "--data-urlencode", "client_id=\(clientID)", "-d",
                    "grant_type=authorization_code&code=bogus&redirect_uri=http://127.0.0.1:1/callback&code_verifier=\(String(repeating: "v", count: 43))",
                    server.issuer + "/token",
                ]
            )
            let body = try JSONSerialization.jsonObject(with: Data(answer.stdout.utf8)) as? [String: Any]
            return body?["error"] as? String ?? answer.stdout
        }
        #expect(try tokenError() != "invalid_client")

        // A provider that refuses the delete: the files stay (here: a registration access token it does not know).
        let original = try Data(contentsOf: URL(fileURLWithPath: registrationFile))
        try Data(String(decoding: original, as: UTF8.self).replacingOccurrences(of: accessToken, with: "not-the-token").utf8)
            .write(to: URL(fileURLWithPath: registrationFile))
        let refused = try daemon.cli(["provider", "remove", "idpy", "--providers-dir", directory, "--yes"])
        #expect(refused.status == 6 && refused.stderr.contains("[registration_refused]") && refused.stderr.contains("nothing was removed"), "\(refused.stderr)")
        #expect(FileManager.default.fileExists(atPath: file) && FileManager.default.fileExists(atPath: registrationFile))
        try original.write(to: URL(fileURLWithPath: registrationFile))

        let removed = try daemon.cli(["provider", "remove", "idpy", "--providers-dir", directory, "--yes"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("Deleted the client \(clientID) at the provider."), "\(removed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: file) && !FileManager.default.fileExists(atPath: registrationFile))
        #expect(try server.idpyStats()["deregistrations"] as? Int == 2)
        #expect(try tokenError() == "invalid_client")

        // A confidential client: private_key_jwt with a key the daemon generated, in other.key.
        let other = try daemon.cli(add.map { $0 == "idpy" ? "other" : $0 } + ["--private-key-jwt"])
        #expect(other.status == 0 && other.stdout.contains("private_key_jwt"), "\(other.stdout) \(other.stderr)")
        let otherProvider = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/other.json"))) as? [String: Any]
        )
        let otherClient = try #require(otherProvider["client_id"] as? String)
        #expect(otherProvider["client_auth"] as? String == "private_key_jwt" && otherProvider["client_key_file"] as? String == directory + "/other.key")
        #expect((otherProvider["client_key_id"] as? String)?.hasPrefix("authgate-") == true && otherProvider["client_secret_file"] == nil, "\(otherProvider)")
        #expect(try FileManager.default.attributesOfItem(atPath: directory + "/other.key")[.posixPermissions] as? Int == 0o600)
        try browserSignIn("other", client: otherClient)
        #expect((try server.idpyStats()["client_auth"] as? [String: Any])?[otherClient] as? String == "private_key_jwt")
        #expect(!other.stdout.contains("PRIVATE KEY") && !daemon.logText.contains("PRIVATE KEY"))

        // --force removes the files of a client the provider will not delete, and says it stays.
        let otherRegistration = directory + "/other.registration"
        let otherRecord = try String(contentsOfFile: otherRegistration, encoding: .utf8)
        let otherToken = try #require(
            (try JSONSerialization.jsonObject(with: Data(otherRecord.utf8)) as? [String: Any])?["registration_access_token"] as? String
        )
        try otherRecord.replacingOccurrences(of: otherToken, with: "not-the-token").write(toFile: otherRegistration, atomically: true, encoding: .utf8)
        let forced = try daemon.cli(["provider", "remove", "other", "--providers-dir", directory, "--yes", "--force"])
        #expect(forced.status == 0 && forced.stderr.contains("stays registered at the provider"), "\(forced.stderr)")
        for leftover in ["other.json", "other.registration", "other.key"] {
            #expect(!FileManager.default.fileExists(atPath: directory + "/" + leftover), "\(leftover)")
        }

        // The RPC's refusals: no registration endpoint, a refused registration, a non-https URI.
        try server.setIdpyMode("no-registration")
        let registerParams: [String: Any] = [
            "issuer": server.issuer, "ca_file": server.caFile, "grants": ["authorization_code"], "redirect_uris": ["http://127.0.0.1/callback"],
            "initial_access_token": "initial-access-secret",
        ]
        let unsupported = try call(try daemon.connect(), "provider.register", registerParams)
        #expect(unsupported.errorReason == "unsupported_grant" && "\(unsupported)".contains("no registration_endpoint"), "\(unsupported)")
        try server.setIdpyMode("normal")

        // idpyoidc's open registration takes a Bearer token for client authentication, and refuses it.
        let tokenRefused = try call(try daemon.connect(), "provider.register", registerParams)
        #expect(
            tokenRefused.errorReason == "registration_refused" && "\(tokenRefused)".contains("refused the initial access token (HTTP 401)"),
            "\(tokenRefused)"
        )
        var deviceOnly = registerParams
        deviceOnly["grants"] = ["device_code"]
        deviceOnly["initial_access_token"] = nil
        deviceOnly["redirect_uris"] = [String]()
        let refusal = try call(try daemon.connect(), "provider.register", deviceOnly)
        #expect(
            refusal.errorReason == "registration_refused" && "\(refusal)".contains("invalid_request (the provider says: Missing required attribute"),
            "\(refusal)"
        )
        let plain = try call(
            try daemon.connect(),
            "provider.deregister",
            ["registration_client_uri": "http://127.0.0.1:1/registration_api", "registration_access_token": "registration-access-secret"]
        )
        #expect(plain.errorReason == "validation_failed" && "\(plain)".contains("registration_client_uri"), "\(plain)")
        for secret in [accessToken, otherToken, "initial-access-secret", "initial-access-cli-secret", "registration-access-secret"] {
            #expect(!daemon.logText.contains(secret), "\(secret) in the daemon's log")
            #expect(!"\(unsupported)\(tokenRefused)\(refusal)\(plain)".contains(secret))
        }
    }

    @Test(
        "add --register --private-key-jwt as root for a daemon running as another user: the key file is root:the daemon's group 0640 (the registration root's 0600), and the daemon reports the registered provider ready",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))
    )
    func registerForAnotherUsersDaemon() throws {
        let idp = try ScratchDirectory()
        chmod(idp.path, 0o755)
        let server = try LoopbackServer.idpy(workdir: idp.path + "/idp")
        // The daemon runs as nobody (uid and group 65534), as the system unit's User=authgate.
        let scratch = try ScratchDirectory()
        chown(scratch.path, 65534, 65534)
        let daemon = try DaemonProcess(
            providers: [:],
            scratch: scratch,
            launcher: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        )
        let directory = daemon.providersDirectory
        let added = try daemon.cli([
            "provider", "add", "svc", "--providers-dir", directory, "--issuer", server.issuer, "--register", "--private-key-jwt",
            "--scope", "openid", "--ca-file", server.caFile,
        ])
        #expect(added.status == 0 && added.stdout.contains("svc is ready"), "\(added.stdout) \(added.stderr)")
        let key = try FileManager.default.attributesOfItem(atPath: directory + "/svc.key")
        #expect(key[.posixPermissions] as? Int == 0o640, "\(key)")
        #expect((key[.ownerAccountID] as? NSNumber)?.intValue == 0 && (key[.groupOwnerAccountID] as? NSNumber)?.intValue == 65534, "\(key)")
        // The registration's access token is for provider remove, run by an admin: root's alone.
        #expect(try FileManager.default.attributesOfItem(atPath: directory + "/svc.registration")[.posixPermissions] as? Int == 0o600)
        let providers = try daemon.cli(["providers"])
        #expect(providers.stdout.split(separator: "\n").contains { $0.hasPrefix("svc ") && $0.contains("ready") }, "\(providers.stdout)")
    }

    @Test(
        "list and remove (and add, by the same code) use the directory the daemon reads (daemon.info), not a guess; a change where the daemon does not read is an error naming both directories, never \"gone\"; no daemon: refused with the reason"
    )
    func directoryTheDaemonReads() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        // No --providers-dir: the daemon's own directory.
        let list = try daemon.cli(["provider", "list"])
        #expect(list.status == 0 && list.stdout.contains(daemon.providersDirectory + "/mock.json"), "\(list.stdout)")
        // Elsewhere: written, but the daemon does not load it, and says so.
        let elsewhere = try ScratchDirectory()
        let wrong = try daemon.cli(["provider", "remove", "mock", "--yes", "--providers-dir", elsewhere.path])
        #expect(wrong.status == 5 && wrong.stderr.contains("[provider_file.not_found]"), "\(wrong)")
        try FileManager.default.copyItem(atPath: daemon.providersDirectory + "/mock.json", toPath: elsewhere.path + "/mock.json")
        let stillThere = try daemon.cli(["provider", "remove", "mock", "--yes", "--providers-dir", elsewhere.path])
        #expect(
            stillThere.status == 5 && stillThere.stderr.contains("still has mock") && stillThere.stderr.contains("(it reads \(daemon.providersDirectory))")
                && stillThere.stderr.contains("[provider_file.not_loaded]") && !stillThere.stdout.contains("is gone"),
            "\(stillThere)"
        )
        // The daemon's directory: removed and gone.
        let removed = try daemon.cli(["provider", "remove", "mock", "--yes"])
        #expect(removed.status == 0 && removed.stdout.contains("mock is gone"), "\(removed)")
        // No daemon to ask: refused, with what to do.
        let orphan = try run(BuiltProducts.cli, ["provider", "list", "--socket", elsewhere.path + "/none.sock"])
        #expect(orphan.status == 2 && orphan.stderr.contains("pass --providers-dir DIR"), "\(orphan)")
    }

    @Test(
        "add --register --grant client_credentials: checked as it will be once registered (a confidential client whose secret the provider issues), registered, ready, and its token served on first use with no login"
    )
    func registerServiceClient() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let daemon = try DaemonProcess(providers: [:])
        let directory = daemon.providersDirectory
        let add = [
            "provider", "add", "svc", "--providers-dir", directory, "--issuer", server.issuer, "--register", "--grant", "client_credentials",
            "--ca-file", server.caFile,
        ]
        let dryRun = try daemon.cli(add + ["--dry-run"])
        #expect(dryRun.status == 0 && dryRun.stderr.contains("a confidential client (client_secret_basic"), "\(dryRun)")
        let added = try daemon.cli(add)
        #expect(added.status == 0 && added.stdout.contains("svc is ready"), "\(added.stdout) \(added.stderr)")
        let file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/svc.json"))) as? [String: Any])
        #expect(file["grants"] as? [String] == ["client_credentials"] && file["client_secret_file"] as? String == directory + "/svc.client-secret", "\(file)")
        let token = try daemon.cli(["token", "svc"])
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token)")
        let secret = try String(contentsOfFile: directory + "/svc.client-secret", encoding: .utf8)
        #expect(!added.stdout.contains(secret) && !daemon.logText.contains(secret))
    }
}
