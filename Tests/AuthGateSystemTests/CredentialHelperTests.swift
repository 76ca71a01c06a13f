import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// git's and docker's credential helpers, driven by the real clients: git (over HTTPS to git's
/// own http-backend, Tests/idp/git_http.py) and PyPI's docker package, which runs credential
/// helpers exactly as the docker CLI does.
@Suite("git and docker credential helpers", .serialized)
struct CredentialHelperTests {
    /// A directory with the helper links, as `scripts/install` makes them.
    static func links(in directory: String) throws -> String {
        let bin = directory + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        for name in ["git-credential-authgate", "docker-credential-authgate"] {
            try FileManager.default.createSymbolicLink(atPath: bin + "/" + name, withDestinationPath: BuiltProducts.cli.path)
        }
        return bin
    }

    /// git's environment, its HOME (and global config) in `scratch`, with `extra`; and a bare
    /// repository with one commit at each of `repositories` under scratch/repos, for git
    /// http-backend to serve.
    static func gitHome(_ scratch: ScratchDirectory, repositories: [String], _ extra: [String: String]) throws -> [String: String] {
        let git = URL(fileURLWithPath: "/usr/bin/git")
        let home = [
            "HOME": scratch.path, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        ].merging(extra) { _, new in new }
        #expect(try run(git, ["init", "-q", scratch.path + "/src"], environment: home).status == 0)
        #expect(try run(git, ["-C", scratch.path + "/src", "commit", "-q", "--allow-empty", "-m", "first"], environment: home).status == 0)
        for repository in repositories {
            #expect(try run(git, ["clone", "-q", "--bare", scratch.path + "/src", "\(scratch.path)/repos/\(repository)"], environment: home).status == 0)
        }
        return home
    }

    static func mock(hosts: [String]) -> String {
        #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "credential_helper": {"hosts": [\#(hosts.map { "\"\($0)\"" }.joined(separator: ", "))], "username": "oauth2"}}"#
    }

    @Test(
        "git ls-remote over HTTPS with git-credential-authgate; another host gets nothing; a refused token is erased and the next get recovers",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/lib/git-core/git-http-backend"))
    )
    func gitThroughTheHelper() throws {
        let scratch = try ScratchDirectory()
        let repos = scratch.path + "/repos"
        let git = URL(fileURLWithPath: "/usr/bin/git")
        let home = try Self.gitHome(scratch, repositories: ["repo.git"], ["GIT_TERMINAL_PROMPT": "0"])
        let tokenFile = scratch.path + "/expected-token"
        try "none".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let server = try LoopbackServer(
            script: "git_http.py",
            workdir: scratch.path + "/tls",
            arguments: ["--project-root", repos, "--token-file", tokenFile]
        )
        let host = "127.0.0.1:\(server.port)"
        let daemon = try DaemonProcess(providers: ["mock.json": Self.mock(hosts: [host])], logLevel: "info", scratch: scratch)
        try daemon.signIn()
        let bin = try Self.links(in: scratch.path)
        var environment = home
        environment["PATH"] = bin + ":/usr/bin:/bin"
        environment["AUTHGATE_SOCKET"] = daemon.socketPath
        environment["GIT_SSL_CAINFO"] = server.caFile
        let lsRemote = [
            "-c", "http.sslCAInfo=\(server.caFile)", "-c", "credential.helper=", "-c", "credential.helper=authgate",
            "ls-remote", "https://\(host)/repo.git",
        ]

        let first = try daemon.cli(["token", "mock", "--min-valid", "60"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try first.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let ok = try run(git, lsRemote, environment: environment)
        #expect(ok.status == 0 && ok.stdout.contains("refs/heads/"), "\(ok.stdout)\(ok.stderr)")

        // The server now wants another token: git is refused, erases the password it tried,
        // which makes the daemon refresh the session; the next command gets the new token.
        try "stale-for-the-server".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let refused = try run(git, lsRemote, environment: environment)
        #expect(refused.status != 0, "\(refused.stderr)")
        let second = try daemon.cli(["token", "mock", "--min-valid", "0"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(second != first, "git's erase refreshed the session")
        try second.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let recovered = try run(git, lsRemote, environment: environment)
        #expect(recovered.status == 0, "\(recovered.stderr)")

        // git-credential-cache configured globally (as git-credential-oauth suggests), and the
        // lines `configure` writes for authgate's hosts: the empty helper resets the list, so
        // the cache never holds (and never serves) authgate's token for this host. A refresh is
        // then seen by the very next git command.
        let global = ["config", "--global"]
        // The cache's daemon, started here by Python, which closes every other descriptor: one
        // that git starts inherits the test's pipes (Foundation's Process leaves them open), and
        // the test would wait for its exit.
        let cacheSocket = scratch.path + "/cache/socket"  // the daemon makes the directory, 0700
        let startCache = """
            import subprocess, sys
            subprocess.Popen(["git", "credential-cache--daemon", sys.argv[1]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
            """
        #expect(try run(URL(fileURLWithPath: LoopbackServer.python), ["-c", startCache, cacheSocket], environment: home).status == 0)
        defer { _ = try? run(git, ["credential-cache", "--socket", cacheSocket, "exit"], environment: home) }
        try eventually { access(cacheSocket, F_OK) == 0 }
        #expect(try run(git, global + ["credential.helper", "cache --timeout=300 --socket \(cacheSocket)"], environment: home).status == 0)
        let configure = try run(BuiltProducts.cli, ["git-credential", "configure", host], environment: environment)
        #expect(configure.status == 0, "\(configure.stderr)")
        let plainLsRemote = ["-c", "http.sslCAInfo=\(server.caFile)", "ls-remote", "https://\(host)/repo.git"]
        func forceRefresh() throws {
            let forced = try daemon.cli(["token", "mock", "--force-refresh"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            try forced.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        }
        for _ in 0..<2 {
            let listed = try run(git, plainLsRemote, environment: environment)
            #expect(listed.status == 0 && listed.stdout.contains("refs/heads/"), "the current token, not a cached one: \(listed.stderr)")
            try forceRefresh()
        }
        // Without the reset line the cache is asked first, and serves the token it stored
        // before the refresh: the server refuses it.
        #expect(try run(git, global + ["--unset-all", "credential.https://\(host).helper", "^$"], environment: home).status == 0)
        #expect(try run(git, plainLsRemote, environment: environment).status == 0, "authgate answers, and the cache stores its token")
        try forceRefresh()
        let stale = try run(git, plainLsRemote, environment: environment)
        #expect(stale.status != 0, "git-credential-cache served the token from before the refresh")
        let verbose = try run(
            URL(fileURLWithPath: bin + "/git-credential-authgate"),
            ["-verbose", "get"],
            stdin: "protocol=https\nhost=\(host)\n\n",
            environment: environment
        )
        #expect(
            verbose.stderr.contains("git-credential-authgate: get: \(host) answered by provider mock, session default, user name oauth2"),
            "\(verbose.stderr)"
        )
        let version = try run(URL(fileURLWithPath: bin + "/git-credential-authgate"), ["version"], environment: environment)
        #expect(version.stdout == "git-credential-authgate (authgate) \(AuthGateVersion.current)\n")
        let none = try run(
            URL(fileURLWithPath: bin + "/git-credential-authgate"),
            ["-verbose", "get"],
            stdin: "protocol=https\nhost=elsewhere.example.com\n\n",
            environment: environment
        )
        #expect(
            none.stdout.isEmpty
                && none.stderr.hasSuffix(
                    "get: no token for elsewhere.example.com: no provider you may use lists it for git (authgate providers --json shows their credential_helper hosts)\n"
                )
                && !none.stderr.contains("see above"),
            "nothing is above to see: \(none)"
        )
        // configure for that host writes the lines, but says no provider lists it, and which
        // hosts they do list.
        let unlisted = try run(BuiltProducts.cli, ["git-credential", "configure", "elsewhere.example.com"], environment: environment)
        #expect(unlisted.status == 0 && unlisted.stdout.contains("credential.https://elsewhere.example.com.helper"), "\(unlisted)")
        #expect(
            unlisted.stderr
                == "authgate: warning: no provider you may use lists elsewhere.example.com for git, so git will get no token from authgate for it until one does; their credential_helper hosts for git: \(host) (mock).\n",
            "\(unlisted.stderr)"
        )

        // A host no provider lists: nothing, exit 0, so git asks its other helpers.
        let other = try run(
            URL(fileURLWithPath: bin + "/git-credential-authgate"),
            ["get"],
            stdin: "protocol=https\nhost=elsewhere.example.com\n\n",
            environment: environment
        )
        #expect(other.status == 0 && other.stdout.isEmpty, "\(other)")
        let expiry = try run(
            URL(fileURLWithPath: bin + "/git-credential-authgate"),
            ["get"],
            stdin: "protocol=https\nhost=\(host)\n\n",
            environment: environment
        )
        #expect(expiry.stdout.contains("username=oauth2\npassword=mock_at_") && expiry.stdout.contains("password_expiry_utc="), "\(expiry.stdout)")
    }

    @Test(
        "configure --use-http-path; two organisations on one forge reach two providers; a user name in the URL chooses its session; authtype=Bearer when git offers it",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/lib/git-core/git-http-backend"))
    )
    func gitPathsSessionsAndBearer() throws {
        let scratch = try ScratchDirectory()
        let repos = scratch.path + "/repos"
        let git = URL(fileURLWithPath: "/usr/bin/git")
        let home = try Self.gitHome(scratch, repositories: ["org-a/repo.git", "org-b/repo.git"], ["GIT_TERMINAL_PROMPT": "0"])
        let server = try LoopbackServer(
            script: "git_http.py",
            workdir: scratch.path + "/tls",
            arguments: ["--project-root", repos, "--path-token", "org-a/=\(scratch.path)/org-a-token", "--path-token", "org-b/=\(scratch.path)/org-b-token"]
        )
        let host = "127.0.0.1:\(server.port)"
        func provider(_ path: String, _ extra: String = "") -> String {
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "credential_helper": {"hosts": ["\#(host)"], "paths": ["\#(path)"]\#(extra)}}"#
        }
        let daemon = try DaemonProcess(
            providers: ["orga.json": provider("org-a/"), "orgb.json": provider("/org-b", #", "authtype": "bearer""#)],
            logLevel: "info",
            scratch: scratch
        )
        for (provider, session) in [("orga", "default"), ("orgb", "default"), ("orga", "alice")] {
            let login = try daemon.cli(["login", provider, "--session", session, "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
            #expect(login.status == 0, "\(login.stderr)")
        }
        func token(_ provider: String, _ session: String = "default") throws -> String {
            try daemon.cli(["token", provider, "--session", session]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let (orgA, orgB, alice) = (try token("orga"), try token("orgb"), try token("orga", "alice"))
        #expect(Set([orgA, orgB, alice]).count == 3)
        try orgA.write(toFile: scratch.path + "/org-a-token", atomically: true, encoding: .utf8)
        try orgB.write(toFile: scratch.path + "/org-b-token", atomically: true, encoding: .utf8)
        let bin = try Self.links(in: scratch.path)
        var environment = home
        environment["PATH"] = bin + ":/usr/bin:/bin"
        environment["AUTHGATE_SOCKET"] = daemon.socketPath
        environment["GIT_SSL_CAINFO"] = server.caFile
        let helper = URL(fileURLWithPath: bin + "/git-credential-authgate")

        // configure writes the lines the docs show, once however often it runs, and prints only
        // what it wrote.
        let configure = try run(helper, ["configure", host, "--use-http-path"], environment: environment)
        #expect(configure.status == 0 && configure.stderr.isEmpty, "\(configure.stderr)")
        #expect(configure.stdout.contains("git config --global --add credential.https://\(host).helper ''\n"), "\(configure.stdout)")
        let again = try run(helper, ["configure", host, "--use-http-path"], environment: environment)
        #expect(again.status == 0 && again.stdout.isEmpty, "\(again.stdout)")
        #expect(again.stderr == "authgate: git's credential lines for https://\(host) are already there; nothing was written.\n", "\(again.stderr)")
        let helpers = try run(git, ["config", "--global", "--get-all", "credential.https://\(host).helper"], environment: home)
        #expect(helpers.stdout == "\nauthgate\n", "\(helpers.stdout.debugDescription)")
        #expect(try run(git, ["config", "--global", "credential.https://\(host).useHttpPath"], environment: home).stdout == "true\n")

        // Each organisation's repository gets its provider's token (the server checks), and
        // -verbose names the provider; without the path only path-scoped providers list the
        // host, so nothing is answered, and -verbose says to set credential.useHttpPath.
        let lsRemote = ["-c", "http.sslCAInfo=\(server.caFile)", "ls-remote"]
        for org in ["org-a", "org-b"] {
            let listed = try run(git, lsRemote + ["https://\(host)/\(org)/repo.git"], environment: environment)
            #expect(listed.status == 0 && listed.stdout.contains("refs/heads/"), "\(org): \(listed.stderr)")
        }
        func get(_ request: String) throws -> ProcessOutput {
            try run(helper, ["-verbose", "get"], stdin: "protocol=https\nhost=\(host)\n\(request)\n", environment: environment)
        }
        let byPath = try get("path=org-a/repo.git\n")
        #expect(byPath.stdout.contains("password=\(orgA)\n"))
        #expect(byPath.stderr.contains("get: \(host) path org-a/repo.git answered by provider orga, session default"), "\(byPath.stderr)")
        let noPath = try get("")
        #expect(noPath.stdout.isEmpty && noPath.stderr.contains("git sent no path: set credential.useHttpPath"), "\(noPath.stderr)")

        // The user name in the URL chooses the session of that name; the default one is not
        // what the server wants for org-a now.
        try alice.write(toFile: scratch.path + "/org-a-token", atomically: true, encoding: .utf8)
        let asAlice = try run(git, lsRemote + ["https://alice@\(host)/org-a/repo.git"], environment: environment)
        #expect(asAlice.status == 0 && asAlice.stdout.contains("refs/heads/"), "\(asAlice.stderr)")
        let asDefault = try run(git, lsRemote + ["https://\(host)/org-a/repo.git"], environment: environment)
        #expect(asDefault.status != 0)
        // git erased the refused token: the path led its erase to orga, whose default session was refreshed.
        let refreshed = try token("orga")
        #expect(refreshed != orgA)
        let named = try get("path=org-a/repo.git\nusername=alice\n")
        #expect(named.stdout.hasPrefix("username=alice\npassword=\(alice)\n"))
        #expect(named.stderr.contains("answered by provider orga, session alice (the user name git sent)"), "\(named.stderr)")
        let unknown = try get("path=org-a/repo.git\nusername=bob\n")
        #expect(unknown.stdout.hasPrefix("username=oauth2\npassword=\(refreshed)\n"), "no session bob: the default session, as before")

        // authtype=Bearer: answered only when git offers capability[]=authtype (git 2.46 and
        // later; this git's ls-remote above got the basic answer from the same provider).
        let bearer = try get("path=org-b/repo.git\ncapability[]=state\ncapability[]=authtype\n")
        let expiry = try #require(bearer.stdout.split(separator: "\n").last)
        #expect(bearer.stdout == "capability[]=authtype\nauthtype=Bearer\ncredential=\(orgB)\n\(expiry)\n" && expiry.hasPrefix("password_expiry_utc="))
        #expect(bearer.stderr.contains("answered by provider orgb, session default, authtype Bearer"), "\(bearer.stderr)")
        let basic = try get("path=org-b/repo.git\n")
        #expect(basic.stdout.hasPrefix("username=oauth2\npassword=\(orgB)\n"))
        #expect(basic.stderr.contains("git offers no capability[]=authtype"), "\(basic.stderr)")
        let basicForOrgA = try get("path=org-a/x.git\ncapability[]=authtype\n")
        #expect(basicForOrgA.stdout.hasPrefix("username=oauth2\npassword=\(refreshed)\n"), "orga asks for basic")

        // unconfigure removes just those lines: a line the user added for the host stays, and so
        // does another tool's helper run through the shell (as the GitHub CLI writes it).
        #expect(try run(git, ["config", "--global", "--add", "credential.https://\(host).helper", "store"], environment: home).status == 0)
        let gh = "!/usr/bin/gh auth git-credential"
        #expect(try run(git, ["config", "--global", "--add", "credential.https://\(host).helper", gh], environment: home).status == 0)
        let unconfigure = try run(helper, ["unconfigure", host, "--use-http-path"], environment: environment)
        #expect(unconfigure.status == 0, "\(unconfigure.stderr)")
        #expect(try run(git, ["config", "--global", "--get-all", "credential.https://\(host).helper"], environment: home).stdout == "store\n\(gh)\n")
        #expect(try run(git, ["config", "--global", "--unset", "credential.https://\(host).helper", "^!/usr/bin/gh"], environment: home).status == 0)
        #expect(try run(git, ["config", "--global", "credential.https://\(host).useHttpPath"], environment: home).status == 1)
        // Where git-credential-authgate is not on PATH (only scripts/install makes the link), the
        // line names this very program, which git runs through the shell: it still works.
        var noLinks = environment
        noLinks["PATH"] = "/usr/bin:/bin"
        let direct = try run(BuiltProducts.cli, ["git-credential", "configure", host, "--use-http-path"], environment: noLinks)
        #expect(direct.status == 0, "\(direct.stderr)")
        let line = try run(git, ["config", "--global", "--get-all", "credential.https://\(host).helper"], environment: home).stdout
        #expect(line == "store\n\n!'\(BuiltProducts.cli.resolvingSymlinksInPath().path)' git-credential\n", "\(line.debugDescription)")
        try refreshed.write(toFile: scratch.path + "/org-a-token", atomically: true, encoding: .utf8)
        let throughLine = try run(git, lsRemote + ["https://\(host)/org-a/repo.git"], environment: noLinks)
        #expect(throughLine.status == 0 && throughLine.stdout.contains("refs/heads/"), "\(throughLine.stderr)")
        #expect(try run(BuiltProducts.cli, ["git-credential", "unconfigure", host, "--use-http-path"], environment: noLinks).status == 0)
        #expect(try run(git, ["config", "--global", "--get-all", "credential.https://\(host).helper"], environment: home).stdout == "store\n")
        let badHost = try run(helper, ["configure", "https://\(host)/"], environment: environment)
        #expect(badHost.status == 5 && badHost.stderr.contains("is not a host") && badHost.stderr.contains("[invalid_params]"), "\(badHost.stderr)")
        let noHost = try run(helper, ["configure"], environment: environment)
        #expect(noHost.status == 64 && noHost.stderr.contains("configure needs the host"), "\(noHost.stderr)")
        var noGit = environment
        noGit["PATH"] = bin
        let missing = try run(helper, ["configure", host], environment: noGit)
        #expect(missing.status == 1 && missing.stderr.contains("git is not installed") && missing.stderr.contains("[git_not_found]"), "\(missing.stderr)")
        for secret in [orgA, orgB, alice, refreshed] { #expect(!daemon.logText.contains(secret)) }
    }

    @Test(
        "docker.credentials.Store runs docker-credential-authgate: get, an identity-token registry, list filtered by tools, not-found, version, unknown action, store refused, erase signs out"
    )
    func dockerThroughTheHelper() throws {
        let gitOnly =
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "credential_helper": {"hosts": ["git.example.com"], "tools": ["git"]}}"#
        let identity =
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "credential_helper": {"hosts": ["id.example.com"], "username": "<token>", "tools": ["docker"]}}"#
        let daemon = try DaemonProcess(
            providers: [
                "mock.json": Self.mock(hosts: ["registry.example.com:5000"]), "gitonly.json": gitOnly,
                "identity.json": identity,
            ],
            logLevel: "info"
        )
        for provider in ["mock", "gitonly", "identity"] {
            #expect(try daemon.cli(["login", provider, "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n").status == 0)
        }
        let token = try daemon.cli(["token", "mock"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let bin = try Self.links(in: daemon.scratch.path)
        let script = """
            import json, os, subprocess, sys
            from docker.credentials import Store, CredentialsNotFound, StoreError
            os.environ["PATH"] = sys.argv[1] + ":/usr/bin:/bin"  # where Store looks for docker-credential-authgate
            store = Store("authgate", environment={"AUTHGATE_SOCKET": sys.argv[2]})
            def error(call):
                try:
                    call()
                    return "no error"
                except CredentialsNotFound:
                    return "not found"
                except StoreError as e:
                    return "error: " + str(e)
            answer = {"get": store.get("https://registry.example.com:5000"), "identity": store.get("id.example.com"), "list": store.list(),
                      "missing": error(lambda: store.get("other.example.com")), "git_only": error(lambda: store.get("git.example.com")),
                      "version": store._execute("version", None).decode(), "unknown": error(lambda: store._execute("bogus", None)),
                      "store": error(lambda: store.store("registry.example.com:5000", "someone", "a-password"))}
            dash_v = subprocess.run(["docker-credential-authgate", "-v"], capture_output=True, text=True, env=dict(os.environ, AUTHGATE_SOCKET=sys.argv[2]))
            answer["dash_v"] = [dash_v.returncode, dash_v.stdout]
            erased = subprocess.run(["docker-credential-authgate", "erase"], input="registry.example.com:5000", capture_output=True, text=True,
                                    env=dict(os.environ, AUTHGATE_SOCKET=sys.argv[2]))
            answer["erase"] = [erased.returncode, erased.stderr]
            print(json.dumps(answer))
            """
        let result = try run(URL(fileURLWithPath: LoopbackServer.python), ["-c", script, bin, daemon.socketPath], prefix: ["/usr/bin/setsid", "--wait"])
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        let got = answer["get"] as? [String: Any]
        #expect(got?["Username"] as? String == "oauth2" && got?["Secret"] as? String == token, "\(result.stdout)\(result.stderr)")
        #expect((answer["identity"] as? [String: Any])?["Username"] as? String == "<token>", "an identity-token registry: \(answer)")
        #expect(answer["list"] as? [String: String] == ["registry.example.com:5000": "oauth2", "id.example.com": "<token>"], "git-only hosts are not docker's")
        #expect(answer["missing"] as? String == "not found")
        #expect(answer["git_only"] as? String == "not found")
        #expect(answer["version"] as? String == "docker-credential-authgate (authgate) \(AuthGateVersion.current)\n")
        let dashV = answer["dash_v"] as? [Any]
        #expect(dashV?.first as? Int == 0 && dashV?.last as? String == "docker-credential-authgate (authgate) \(AuthGateVersion.current)\n", "\(answer)")
        #expect((answer["unknown"] as? String)?.hasSuffix(#"exited with "docker-credential-authgate: unknown action: bogus\#n"."#) == true, "\(answer)")
        #expect((answer["store"] as? String)?.contains("sign in with `authgate login mock`") == true, "\(answer)")
        let erase = answer["erase"] as? [Any]
        #expect(erase?.first as? Int == 0 && (erase?.last as? String)?.contains("signed out of mock") == true, "\(answer)")
        let status = try daemon.cli(["token", "mock"])
        #expect(status.status == 3, "docker logout signed the session out: \(status.stderr)")
        #expect(!result.stdout.contains("a-password") && !daemon.logText.contains("a-password"))
    }

    /// Runs `command` under a pseudo-terminal (its controlling terminal, as a person's shell
    /// gives it), approves as alice the device code it shows, and returns its exit status and
    /// everything the terminal showed.
    static func onTerminalApprovingDeviceCode(
        _ command: [String],
        idp: LoopbackServer,
        environment: [String: String]
    ) throws -> (status: Int, output: String) {
        let shown = try OnTerminal.run(
            command,
            steps: [.approveDeviceCode(pattern: #"(https://[^\s()]*user_code=[^\s()]+)"#, idp: idp)],
            environment: environment
        )
        guard shown.approvals.first?.contains("Authorized") == true else {
            throw TestFailure("the device code was not approved (\(shown.approvals.first ?? "never shown")); the terminal showed:\n\(shown.output)")
        }
        return (shown.status, shown.output)
    }

}
