import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Device-code and browser sign-ins (login.begin / login.complete / login.cancel) against the
/// real authorization server, with the user played by Tests/idp/play_user.py, through the
/// daemon's socket and the CLI.
@Suite("Interactive sign-ins against a real authorization server")
struct InteractiveLoginTests {
    /// The server, and a daemon with `corp` (device code, client authgate-device) and `web`
    /// (browser, client `browserClient`).
    func setUp(
        browserClient: String = "authgate-browser",
        iss: Bool = false,
        daemonArguments: [String] = []
    ) throws -> SignInFixture {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp", authorizationResponseIss: iss)
        let daemon = try DaemonProcess(
            providers: [
                "corp.json": Interactive.provider(server, client: "authgate-device", grants: ["device_code"]),
                "web.json": Interactive.provider(server, client: browserClient, grants: ["authorization_code"]),
            ],
            arguments: daemonArguments
        )
        try daemon.waitForLog("provider ready")
        return SignInFixture(scratch: scratch, server: server, daemon: daemon)
    }

    func begin(_ connection: RPCConnection, _ provider: String, _ grant: String, prompt: String? = nil) throws -> [String: Any] {
        var params: [String: Any] = ["provider": provider, "grant": grant]
        if let prompt { params["prompt"] = prompt }
        let reply = try call(connection, "login.begin", params)
        guard reply.result != nil else { throw TestFailure("login.begin failed: \(reply)") }
        return reply.object
    }

    // MARK: Device authorization grant

    @Test(
        "device code from the CLI (the default without a display for a device-code provider): URL and code printed, approved by the user, signed in; no secret in logs or output"
    )
    func deviceSuccess() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let cli = try daemon.backgroundCLI(["login", "corp"])
        try cli.waitForOutput("which has the code filled in")
        let complete = try #require(cli.stderr.components(separatedBy: "(or open ").last?.components(separatedBy: ",").first)
        let userCode = try #require(cli.stderr.components(separatedBy: "enter the code:").last?.split(separator: "\n").first)
            .trimmingCharacters(in: .whitespaces)
        #expect(cli.stderr.contains("To sign in to corp, open \(server.issuer)/device/"))
        #expect(Interactive.query("user_code", of: complete) == userCode)

        let approved = try Interactive.device(server, verificationURIComplete: complete)
        #expect(approved["status"] as? String == "Authorized")
        #expect(try cli.waitForExit() == 0, "\(cli.stderr)")
        // The name the user knows (preferred_username), not the server's opaque subject "1".
        #expect(cli.stdout.hasPrefix("Signed in to corp as alice."), "\(cli.stdout)")

        let token = try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .newlines)
        #expect(!token.isEmpty)
        let userinfo = try run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            [
                "-sS", "--cacert", server.caFile, "-H", "Authorization: Bearer \(token)",
                server.endpoints["userinfo"] ?? "",
            ]
        )
        #expect(userinfo.stdout.contains(#""sub": "1""#) || userinfo.stdout.contains(#""sub":"1""#), "the server accepts the token")
        #expect(try daemon.cli(["status", "--json"]).stdout.contains(#""state":"authenticated""#))
        try daemon.waitForLog("signed in", timeout: .seconds(10))
        #expect(!daemon.logText.contains(token))
        #expect(!cli.stdout.contains(token) && !cli.stderr.contains(token))
    }

    @Test("device code denied by the user: permission_denied")
    func deviceDenied() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let flow = try begin(connection, "corp", "device_code")
        let complete = try #require(flow["verification_uri_complete"] as? String)
        #expect(flow["user_code"] as? String != nil)
        #expect(flow["authorization_url"] == nil)
        let denied = try Interactive.device(server, verificationURIComplete: complete, deny: true)
        #expect(denied["status"] as? String == "Denied")
        let reply = try call(connection, "login.complete", ["flow_id": flow["flow_id"] as? String ?? ""])
        #expect(reply.errorReason == "permission_denied", "\(reply)")
        #expect(reply.errorMessage?.contains("denied") == true)
        #expect(try daemon.cli(["token", "corp"]).status == 3, "no session")
    }

    @Test("a sign-in nobody completes ends with flow_expired at the daemon's --login-timeout")
    func expiry() throws {
        let fixture = try setUp(daemonArguments: ["--login-timeout", "3"])
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let started = Date()
        let flow = try begin(connection, "corp", "device_code")
        let flowID = try #require(flow["flow_id"] as? String)
        let expiresAt = try #require((flow["expires_at"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
        #expect(expiresAt.timeIntervalSince(started) < 5, "the flow's lifetime is the daemon's, not the device code's 600 s")
        let reply = try call(connection, "login.complete", ["flow_id": flowID])
        #expect(reply.errorReason == "flow_expired", "\(reply)")
        #expect(Date().timeIntervalSince(started) >= 2.5)
        // The outcome stays for a late caller; a new begin starts a new flow.
        #expect(try call(connection, "login.complete", ["flow_id": flowID]).errorReason == "flow_expired")
        #expect(try begin(connection, "corp", "device_code")["flow_id"] as? String != flowID)

        // The browser flow expires too, and its redirect listener closes.
        let web = try begin(connection, "web", "authorization_code")
        let redirect = try #require(Interactive.query("redirect_uri", of: web["authorization_url"] as? String ?? ""))
        #expect(try Interactive.get(redirect).status == 400, "listening while pending (no state: refused)")
        let expired = try call(connection, "login.complete", ["flow_id": web["flow_id"] as? String ?? ""])
        #expect(expired.errorReason == "flow_expired")
        // The listener is closed: connection refused.
        try eventually { try Interactive.get(redirect).exit == 7 }
        try daemon.waitForLog("sign-in expired", timeout: .seconds(10))

        let cli = try daemon.cli(["login", "corp", "--device", "--no-qr"])
        #expect(cli.status == 3)
        #expect(cli.stderr.contains("[flow_expired]"))
    }

    @Test("two concurrent login.begin for the same provider and session join one flow")
    func concurrentBeginsJoin() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let results = SignInResults()
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            results.set(index, try? self.begin(try daemon.connect(), "corp", "device_code"))
        }
        let connections = [try daemon.connect(), try daemon.connect()]
        let first = try #require(results.get(0))
        let second = try #require(results.get(1))
        #expect(first["flow_id"] as? String != nil)
        #expect(first["flow_id"] as? String == second["flow_id"] as? String)
        #expect(first["user_code"] as? String == second["user_code"] as? String, "one code, not two")
        // The log line may follow the answer by a moment.
        try daemon.waitForLog("sign-in joined", timeout: .seconds(5))
        try eventually { daemon.logText.components(separatedBy: "sign-in started").count == 2 }  // one flow started
        // Asking for something else does not join: the pending flow is named instead.
        let different = try call(connections[0], "login.begin", ["provider": "corp", "grant": "device_code", "scopes": ["openid"]])
        #expect(different.errorReason == "invalid_request", "\(different)")
        #expect(different.errorMessage?.contains("pending for this session") == true)
        // Another session name is another flow.
        let other = try call(connections[0], "login.begin", ["provider": "corp", "grant": "device_code", "session": "second"]).object
        #expect(other["flow_id"] as? String != first["flow_id"] as? String)
        let cancelled = try call(connections[0], "login.cancel", ["flow_id": first["flow_id"] as? String ?? ""])
        #expect((cancelled.object["cancelled"] as? Bool) == true)
        #expect((try call(connections[1], "login.cancel", ["flow_id": first["flow_id"] as? String ?? ""]).object["cancelled"] as? Bool) == false)
        let afterCancel = try call(connections[1], "login.complete", ["flow_id": first["flow_id"] as? String ?? ""])
        #expect(afterCancel.errorReason == "login_cancelled" && afterCancel.errorMessage?.contains("cancelled") == true, "\(afterCancel)")
    }

    @Test(
        "another uid can neither complete nor cancel someone's flow: to it the flow does not exist",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"),
            "needs root, setpriv and python3 to call as another uid"
        )
    )
    func otherUsersFlow() throws {
        let fixture = try setUp(daemonArguments: ["--socket-group", "nogroup"])
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        chmod(daemon.scratch.path, 0o755)
        let connection = try daemon.connect()
        let flowID = try #require(try begin(connection, "corp", "device_code")["flow_id"] as? String)
        // One raw request as nobody (uid 65534); prints the answer line.
        func asNobody(_ method: String, _ params: String) throws -> String {
            let line = #"{"jsonrpc":"2.0","id":1,"method":"\#(method)","params":\#(params)}"#
            let script =
                "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode()+b'\\n'); print(s.makefile().readline())"
            let result = try run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3", "-c", script, daemon.socketPath, line]
            )
            return result.stdout + result.stderr
        }
        let complete = try asNobody("login.complete", #"{"flow_id":"\#(flowID)","timeout_seconds":1}"#)
        #expect(complete.contains(#""reason":"flow_expired""#), "\(complete)")
        let cancel = try asNobody("login.cancel", #"{"flow_id":"\#(flowID)"}"#)
        #expect(cancel.contains(#""reason":"flow_expired""#), "\(cancel)")
        #expect(
            (try call(connection, "login.cancel", ["flow_id": flowID]).object["cancelled"] as? Bool) == true,
            "the owner's flow was still pending"
        )
    }

    // MARK: Authorization code with PKCE

    @Test(
        "browser from the CLI: authorization URL with PKCE S256, state and nonce; signed in; the listener closes; no code, verifier or token in logs or output"
    )
    func browserSuccess() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let cli = try daemon.backgroundCLI(["login", "web", "--browser", "--no-browser"])
        try cli.waitForOutput("Ctrl-C cancels it")
        let url = try #require(cli.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("https://") })
        #expect(Interactive.query("code_challenge_method", of: url) == "S256")
        #expect(Interactive.query("response_type", of: url) == "code")
        #expect(Interactive.query("nonce", of: url)?.count ?? 0 >= 32)
        #expect(Interactive.query("state", of: url)?.count ?? 0 >= 32)
        let challenge = try #require(Interactive.query("code_challenge", of: url))
        let redirectURI = try #require(Interactive.query("redirect_uri", of: url))
        #expect(redirectURI.hasPrefix("http://127.0.0.1:") && redirectURI.hasSuffix("/callback"))

        let played = try Interactive.browser(server, authorizationURL: url)
        #expect(played["callback_status"] as? Int == 200)
        #expect((played["callback_body"] as? String)?.contains("you can close this tab") == true)
        #expect(try cli.waitForExit() == 0, "\(cli.stderr)")
        #expect(cli.stdout.hasPrefix("Signed in to web as alice."), "\(cli.stdout)")
        let redirect = try #require(played["redirect"] as? String)
        let code = try #require(Interactive.query("code", of: redirect))

        // The listener closed with the flow: the same redirect again finds nobody.
        #expect(try Interactive.get(redirect).exit == 7)
        let token = try daemon.cli(["token", "web"]).stdout.trimmingCharacters(in: .newlines)
        #expect(!token.isEmpty)
        let everything = daemon.logText + cli.stdout + cli.stderr
        for secret in [code, token] { #expect(!everything.contains(secret)) }
        #expect(Interactive.verifiers(in: everything, matching: challenge).isEmpty)
        try daemon.waitForLog("signed in", timeout: .seconds(10))
    }

    @Test("register on an OpenID provider opens the provider's sign-up page (prompt=create)")
    func registerThroughProvider() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        #expect(
            try daemon.cli(["providers", "--json"]).stdout.contains(#""id":"web","registration":true"#)
                || (try daemon.cli(["providers"]).stdout.contains("authorization_code,register"))
        )
        let cli = try daemon.backgroundCLI(["register", "web", "--no-browser"])
        try cli.waitForOutput("Ctrl-C cancels it")
        let url = try #require(cli.stderr.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("https://") })
        #expect(Interactive.query("prompt", of: url) == "create")
        #expect(Interactive.query("code_challenge_method", of: url) == "S256")
        // This server has no sign-up page: it refuses prompt=create outright (a 400, no redirect).
        let page = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--cacert", server.caFile, "-w", "\n%{http_code}", url])
        #expect(page.stdout.hasSuffix("\n400"))
        #expect(page.stdout.contains("prompt=create is not supported"))
        kill(cli.pid, SIGINT)
        #expect(try cli.waitForExit() == 130)
        #expect(cli.stderr.contains("cancelled"))
        // The mock keeps its direct registration; the RPC register on an OIDC provider says where to go.
        let connection = try daemon.connect()
        let direct = try call(
            connection,
            "register",
            ["provider": "web", "username": "x", "email": "x@example.com", "password": "p", "password_confirmation": "p"]
        )
        #expect(direct.errorReason == "unsupported_grant")
        #expect(direct.errorMessage?.contains("prompt") == true)
    }

    @Test("login.begin refuses what it cannot do, each with its reason")
    func beginRefusals() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        #expect(try call(connection, "login.begin", ["provider": "corp", "grant": "authorization_code"]).errorReason == "unsupported_grant")
        #expect(try call(connection, "login.begin", ["provider": "corp", "grant": "password"]).errorReason == "validation_failed")
        #expect(try call(connection, "login.begin", ["provider": "corp", "grant": "device_code", "prompt": "create"]).errorReason == "validation_failed")
        #expect(try call(connection, "login.begin", ["provider": "web", "grant": "authorization_code", "prompt": "none"]).errorReason == "validation_failed")
        #expect(try call(connection, "login.begin", ["provider": "corp"]).errorReason == "invalid_params")
        #expect(try call(connection, "login.begin", ["provider": "nope", "grant": "device_code"]).errorReason == "unknown_provider")
        #expect(try call(connection, "login.complete", ["flow_id": "flow_unknown"]).errorReason == "flow_expired")
        #expect(try call(connection, "login.cancel", ["flow_id": "flow_unknown"]).errorReason == "flow_expired")
        #expect(try call(connection, "login", ["provider": "corp", "grant": "device_code"]).errorMessage?.contains("login.begin") == true)

        // At most 8 pending flows per uid: the 9th is rate_limited until one ends.
        var flowIDs: [String] = []
        for index in 0..<8 {
            let reply = try call(connection, "login.begin", ["provider": "web", "grant": "authorization_code", "session": "s\(index)"])
            flowIDs.append(try #require(reply.object["flow_id"] as? String, "\(reply)"))
        }
        let ninth = try call(connection, "login.begin", ["provider": "web", "grant": "authorization_code", "session": "s8"])
        #expect(ninth.errorReason == "rate_limited", "\(ninth)")
        #expect(
            try call(connection, "login.begin", ["provider": "web", "grant": "authorization_code", "session": "s0"]).object["flow_id"] as? String
                == flowIDs[0],
            "joining is still allowed"
        )
        #expect((try call(connection, "login.cancel", ["flow_id": flowIDs[0]]).object["cancelled"] as? Bool) == true)
        #expect(try call(connection, "login.begin", ["provider": "web", "grant": "authorization_code", "session": "s8"]).object["flow_id"] != nil)
    }

    @Test("a reload that changes the provider ends a sign-in under way: login.complete says login_cancelled and why")
    func reloadEndsPendingSignIn() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let flow = try begin(connection, "corp", "device_code")
        let flowID = try #require(flow["flow_id"] as? String)
        let changed = Interactive.provider(fixture.server, client: "authgate-device", grants: ["device_code"], extra: #", "display_name": "Corp, renamed""#)
        try changed.write(toFile: daemon.providersDirectory + "/corp.json", atomically: true, encoding: .utf8)
        #expect(try daemon.cli(["reload"]).status == 0)
        let ended = try call(connection, "login.complete", ["flow_id": flowID])
        #expect(ended.errorReason == "login_cancelled" && ended.errorMessage?.contains("an administrator changed the provider") == true, "\(ended)")
    }

    @Test("stopping the daemon cancels pending flows and closes their listeners")
    func shutdownClosesListeners() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let flow = try begin(connection, "web", "authorization_code")
        let redirect = try #require(Interactive.query("redirect_uri", of: flow["authorization_url"] as? String ?? ""))
        #expect(try Interactive.get(redirect).status == 400)
        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit(timeout: .seconds(15)) == 0)
        #expect(try Interactive.get(redirect).exit == 7)
    }
}

/// Results written by concurrent blocks.
final class SignInResults: @unchecked Sendable {
    let lock = NSLock()
    var values: [Int: [String: Any]] = [:]
    func set(_ index: Int, _ value: [String: Any]?) { lock.withLock { values[index] = value } }
    func get(_ index: Int) -> [String: Any]? { lock.withLock { values[index] } }
}

/// What a test needs alive until its end: the scratch directory (the server's CA file lives
/// there), the authorization server and the daemon.
final class SignInFixture {
    let scratch: ScratchDirectory
    let server: LoopbackServer
    let daemon: DaemonProcess

    init(scratch: ScratchDirectory, server: LoopbackServer, daemon: DaemonProcess) {
        self.scratch = scratch
        self.server = server
        self.daemon = daemon
    }
}
