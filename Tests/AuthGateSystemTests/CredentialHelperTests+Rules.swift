import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The helpers' rules: signing in where git asks (a terminal or none), a provider's short
/// tokens, the providers' access rules, https only, and docker's config.json.
extension CredentialHelperTests {
    @Test(
        "no session: with a terminal, git's helper runs the device sign-in there and git ls-remote goes on; with none (or GIT_TERMINAL_PROMPT=0) git, docker and kubectl give their 'no credentials' answer and the sentence",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/lib/git-core/git-http-backend"))
    )
    func signInWhereGitAsks() throws {
        let scratch = try ScratchDirectory()
        let repos = scratch.path + "/repos"
        let git = URL(fileURLWithPath: "/usr/bin/git")
        let home = try Self.gitHome(scratch, repositories: ["repo.git"], ["DISPLAY": "", "WAYLAND_DISPLAY": ""])
        let idp = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let forge = try LoopbackServer(
            script: "git_http.py",
            workdir: scratch.path + "/tls",
            arguments: ["--project-root", repos, "--userinfo", idp.endpoints["userinfo"] ?? "", "--userinfo-ca", idp.caFile]
        )
        let host = "127.0.0.1:\(forge.port)"
        let provider = Interactive.provider(
            idp,
            client: "authgate-device",
            grants: ["device_code"],
            extra: #", "credential_helper": {"hosts": ["\#(host)"], "username": "oauth2"}"#
        )
        let daemon = try DaemonProcess(providers: ["corp.json": provider], logLevel: "info", scratch: scratch)
        try daemon.waitForLog("provider ready")
        let bin = try Self.links(in: scratch.path)
        var environment = home
        environment["PATH"] = bin + ":/usr/bin:/bin"
        environment["AUTHGATE_SOCKET"] = daemon.socketPath
        environment["GIT_SSL_CAINFO"] = forge.caFile
        let lsRemote = [
            "-c", "http.sslCAInfo=\(forge.caFile)", "-c", "credential.helper=", "-c", "credential.helper=authgate",
            "ls-remote", "https://\(host)/repo.git",
        ]
        let setsid = ["/usr/bin/setsid", "--wait"]  // no controlling terminal, whatever runs the tests

        // Nobody there: git asks no one else and fails at once, with the sentence.
        var noPrompt = environment
        noPrompt["GIT_TERMINAL_PROMPT"] = "0"
        let started = ContinuousClock.now
        let refused = try run(git, lsRemote, environment: noPrompt, prefix: setsid)
        #expect(refused.status != 0 && refused.stderr.contains("sign in first: authgate login corp"), "\(refused.stderr)")
        #expect(refused.stderr.contains("GIT_TERMINAL_PROMPT=0"), "\(refused.stderr)")
        #expect(ContinuousClock.now - started < .seconds(10))
        let noTerminal = try run(
            URL(fileURLWithPath: bin + "/git-credential-authgate"),
            ["get"],
            stdin: "protocol=https\nhost=\(host)\n\n",
            environment: environment,
            prefix: setsid
        )
        #expect(noTerminal.status == 0 && noTerminal.stdout.isEmpty && noTerminal.stderr.contains("authgate login corp"), "\(noTerminal)")
        let docker = try run(
            URL(fileURLWithPath: bin + "/docker-credential-authgate"),
            ["get"],
            stdin: host + "\n",
            environment: environment,
            prefix: setsid
        )
        #expect(docker.status == 1 && docker.stdout == "credentials not found in native keychain\n", "\(docker)")
        #expect(docker.stderr.contains("sign in first: authgate login corp"), "\(docker.stderr)")
        var kubectlEnvironment = environment
        kubectlEnvironment["KUBERNETES_EXEC_INFO"] = #"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}"#
        let kubectl = try run(BuiltProducts.cli, ["kubectl", "corp"], environment: kubectlEnvironment, prefix: setsid)
        #expect(kubectl.status == 3 && kubectl.stdout.isEmpty && kubectl.stderr.contains("sign in first: authgate login corp"), "\(kubectl)")

        // A person at a terminal: the sign-in runs there, and the same git command succeeds.
        let signedIn = try Self.onTerminalApprovingDeviceCode(["/usr/bin/git"] + lsRemote, idp: idp, environment: environment)
        #expect(signedIn.status == 0 && signedIn.output.contains("refs/heads/"), "\(signedIn.output)")
        #expect(signedIn.output.contains("git asks authgate for a token of corp") && signedIn.output.contains("Signed in to corp"), "\(signedIn.output)")
        #expect(signedIn.output.contains("for the local account ") && signedIn.output.contains("(uid \(geteuid()))"), "names whose session it fills")
        let after = try run(git, lsRemote, environment: noPrompt, prefix: setsid)
        #expect(after.status == 0 && after.stdout.contains("refs/heads/"), "\(after.stderr)")
        let token = try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!token.isEmpty && !signedIn.output.contains(token), "the token never reaches the terminal")
    }

    @Test("a provider issuing 60 s tokens and a helper asking 60 s: 100 gets in a row cost at most 2 refreshes")
    func unmeetableMinimumThroughTheHelper() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path + "/tls", mode: "ok", expiresIn: 60)
        let provider = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
             "tls": {"ca_file": "\#(server.caFile)"}, "credential_helper": {"hosts": ["git.example.com"], "username": "oauth2"}}
            """#
        let daemon = try DaemonProcess(providers: ["faulty.json": provider], logLevel: "info", scratch: scratch)
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let bin = try Self.links(in: scratch.path)
        let environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": bin + ":/usr/bin:/bin"]
        let before = try server.tokenRequests()
        var answered = 0
        for _ in 0..<100 {
            let get = try run(
                URL(fileURLWithPath: bin + "/git-credential-authgate"),
                ["get"],
                stdin: "protocol=https\nhost=git.example.com\n\n",
                environment: environment
            )
            if get.status == 0, get.stdout.contains("password=faulty-at-") { answered += 1 }
        }
        let refreshes = try server.tokenRequests() - before
        print("60 s tokens, 100 helper gets asking 60 s: \(refreshes) refresh(es) at the provider")
        #expect(answered == 100)
        #expect(refreshes <= 2)
        try daemon.waitForLog("a caller asks a minimum validity the provider's tokens do not have")
        #expect(daemon.logText.components(separatedBy: "a caller asks a minimum validity").count == 2, "logged once")
    }

    @Test("every helper refuses a caller the provider's access rules refuse: git and docker find nothing, kubectl and exec are refused")
    func helpersFollowAccessRules() throws {
        let locked =
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"users": ["65534"]}, "credential_helper": {"hosts": ["locked.example.com"]}}"#
        let daemon = try DaemonProcess(providers: ["locked.json": locked], logLevel: "info")
        let bin = try Self.links(in: daemon.scratch.path)
        let environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": bin + ":/usr/bin:/bin"]
        let git = try run(
            URL(fileURLWithPath: bin + "/git-credential-authgate"),
            ["get"],
            stdin: "protocol=https\nhost=locked.example.com\n\n",
            environment: environment
        )
        #expect(git.status == 0 && git.stdout.isEmpty, "\(git)")
        let docker = try run(URL(fileURLWithPath: bin + "/docker-credential-authgate"), ["get"], stdin: "locked.example.com\n", environment: environment)
        #expect(docker.status == 1 && docker.stdout == "credentials not found in native keychain\n", "\(docker)")
        let kubectl = try daemon.cli(["kubectl", "locked"])
        #expect(kubectl.status == 8 && kubectl.stderr.contains("[permission_denied]"), "\(kubectl)")
        let exec = try daemon.cli(["exec", "locked", "--", "/bin/true"])
        #expect(exec.status == 8 && exec.stderr.contains("[permission_denied]"), "\(exec)")
    }

    @Test(
        "git's helper answers protocol=https only (none named or http gets nothing); docker's answers a bare host or https://, and not-found for http://"
    )
    func httpsOnly() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Self.mock(hosts: ["git.example.com", "registry.example.com:5000"])], logLevel: "info")
        try daemon.signIn()
        let bin = try Self.links(in: daemon.scratch.path)
        let environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": bin + ":/usr/bin:/bin"]
        let git = URL(fileURLWithPath: bin + "/git-credential-authgate")
        let docker = URL(fileURLWithPath: bin + "/docker-credential-authgate")

        for request in ["host=git.example.com\n\n", "protocol=http\nhost=git.example.com\n\n", "protocol=ftp\nhost=git.example.com\n\n"] {
            // Outputs are summed up, never printed: a wrong answer would hold a token.
            let nothing = try run(git, ["get"], stdin: request, environment: environment)
            let answered = !nothing.stdout.isEmpty
            #expect(nothing.status == 0 && !answered, "\(request.debugDescription): \(nothing.stderr)")
        }
        let https = try run(git, ["get"], stdin: "protocol=https\nhost=git.example.com\n\n", environment: environment)
        let answered = https.stdout.contains("username=oauth2\npassword=mock_at_")
        #expect(https.status == 0 && answered, "https is answered: \(https.stderr)")
        // The scheme's default port is the same server.
        let defaultPort = try run(git, ["get"], stdin: "protocol=https\nhost=git.example.com:443\n\n", environment: environment)
        let answeredOnPort = defaultPort.stdout.contains("username=oauth2\npassword=mock_at_")
        #expect(defaultPort.status == 0 && answeredOnPort, "git.example.com:443 is git.example.com: \(defaultPort.stderr)")

        for url in ["http://registry.example.com:5000", "HTTP://registry.example.com:5000/v2/", "ftp://registry.example.com:5000"] {
            let refused = try run(docker, ["get"], stdin: url + "\n", environment: environment)
            let notFound = refused.stdout == "credentials not found in native keychain\n"
            #expect(refused.status == 1 && notFound, "\(url): \(refused.stderr)")
        }
        for url in ["registry.example.com:5000", "https://registry.example.com:5000", "HTTPS://registry.example.com:5000/v2/"] {
            let found = try run(docker, ["get"], stdin: url + "\n", environment: environment)
            let answered = found.stdout.contains(#""Secret":"mock_at_"#)
            #expect(found.status == 0 && answered, "\(url) is answered: \(found.stderr)")
        }
    }

    @Test(
        "docker-credential configure/unconfigure REGISTRY: the credHelpers entry in docker's config.json, the rest of the file kept, idempotent; a file that is not docker's JSON is left alone"
    )
    func dockerConfigure() throws {
        let scratch = try ScratchDirectory()
        let config = scratch.path + "/docker/config.json"
        let environment = ["DOCKER_CONFIG": scratch.path + "/docker", "PATH": "/usr/bin:/bin"]
        func document() throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: config))) as? [String: Any])
        }
        // No file yet: made, 0600 in a 0700 directory.
        let first = try run(BuiltProducts.cli, ["docker-credential", "configure", "registry.example.com:5000"], environment: environment)
        #expect(first.status == 0, "\(first)")
        #expect((try document()["credHelpers"] as? [String: String]) == ["registry.example.com:5000": "authgate"])
        #expect(try FileManager.default.attributesOfItem(atPath: config)[.posixPermissions] as? Int == 0o600)
        // docker's own entries stay.
        let existing = #"{"auths": {"ghcr.io": {"auth": "dXNlcjpwYXNz"}}, "credHelpers": {"gcr.io": "gcloud"}, "experimental": "enabled"}"#
        try existing.write(toFile: config, atomically: false, encoding: .utf8)
        for _ in 0..<2 {
            #expect(try run(BuiltProducts.cli, ["docker-credential", "configure", "registry.example.com"], environment: environment).status == 0)
        }
        var written = try document()
        #expect((written["credHelpers"] as? [String: String]) == ["gcr.io": "gcloud", "registry.example.com": "authgate"], "\(written)")
        #expect(
            ((written["auths"] as? [String: Any])?["ghcr.io"] as? [String: String])?["auth"] == "dXNlcjpwYXNz"
                && written["experimental"] as? String == "enabled"
        )
        let removed = try run(BuiltProducts.cli, ["docker-credential", "unconfigure", "registry.example.com"], environment: environment)
        #expect(removed.status == 0 && removed.stdout.contains("removed the credHelpers entry"), "\(removed)")
        written = try document()
        #expect((written["credHelpers"] as? [String: String]) == ["gcr.io": "gcloud"] && written["auths"] != nil, "\(written)")
        let again = try run(BuiltProducts.cli, ["docker-credential", "unconfigure", "registry.example.com"], environment: environment)
        #expect(again.status == 0 && again.stdout.contains("nothing to remove"))
        // Another helper's entry is not removed.
        let theirs = try run(BuiltProducts.cli, ["docker-credential", "unconfigure", "gcr.io"], environment: environment)
        let kept = try document()["credHelpers"] as? [String: String]
        #expect(theirs.status == 0 && kept == ["gcr.io": "gcloud"])
        // Not a JSON object: refused, the file as it was.
        try "[1, 2".write(toFile: config, atomically: false, encoding: .utf8)
        let broken = try run(BuiltProducts.cli, ["docker-credential", "configure", "registry.example.com"], environment: environment)
        #expect(broken.status == 5 && broken.stderr.contains("is not a JSON object docker wrote"), "\(broken)")
        #expect(try String(contentsOfFile: config, encoding: .utf8) == "[1, 2")
        let bad = try run(BuiltProducts.cli, ["docker-credential", "configure", "https://registry.example.com/"], environment: environment)
        #expect(bad.status == 5 && bad.stderr.contains("is not a registry"), "\(bad)")
    }
}
