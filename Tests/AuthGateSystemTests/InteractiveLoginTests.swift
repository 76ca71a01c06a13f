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
    private func setUp(
        browserClient: String = "authgate-browser",
        iss: Bool = false,
        daemonArguments: [String] = []
    ) throws -> Fixture {
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
        return Fixture(scratch: scratch, server: server, daemon: daemon)
    }

    private func begin(_ connection: RPCConnection, _ provider: String, _ grant: String, prompt: String? = nil) throws -> [String: Any] {
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
        let results = SharedResults()
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

    @Test("browser: the user cancels on the consent page: permission_denied, and the browser is told")
    func browserDenied() throws {
        let fixture = try setUp(browserClient: "authgate-browser-consent")
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let flow = try begin(connection, "web", "authorization_code")
        let played = try Interactive.browser(server, authorizationURL: flow["authorization_url"] as? String ?? "", deny: true)
        #expect(played["consent"] as? String == "denied")
        #expect(played["callback_status"] as? Int == 400)
        #expect((played["callback_body"] as? String)?.contains("access_denied") == true)
        let reply = try call(connection, "login.complete", ["flow_id": flow["flow_id"] as? String ?? ""])
        #expect(reply.errorReason == "permission_denied", "\(reply)")
    }

    @Test("browser: a redirect with another state is refused and the flow keeps waiting for the real one")
    func wrongState() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let flow = try begin(connection, "web", "authorization_code")
        let flowID = flow["flow_id"] as? String ?? ""
        let redirect = try #require(
            Interactive.browser(server, authorizationURL: flow["authorization_url"] as? String ?? "", follow: false)["redirect"] as? String
        )
        let forged = try Interactive.get(Interactive.replacing("state", with: "forged-state-value", in: redirect))
        #expect(forged.status == 400)
        #expect(forged.body.contains("state does not match"))
        let missing = try Interactive.get(Interactive.replacing("state", with: nil, in: redirect))
        #expect(missing.status == 400)
        let path = try Interactive.get(redirect.replacingOccurrences(of: "/callback?", with: "/elsewhere?"))
        #expect(path.status == 404, "only the redirect path is served")
        let pending = try call(connection, "login.complete", ["flow_id": flowID, "timeout_seconds": 1])
        #expect(pending.errorReason == "login_pending")
        #expect(pending.errorMessage?.contains("still waiting") == true)
        // Any local user can connect: 32 idle connections are held, a 33rd is closed at once,
        // and the held ones are closed 2 s after connecting (the header deadline).
        let port = try #require(URLComponents(string: redirect)?.port)
        let crowd = try run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c",
                """
                import socket, sys, time
                began = time.time()
                held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(32)]
                time.sleep(0.3)
                extra = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                extra.settimeout(1.5)
                try:
                    print("closed" if extra.recv(1) == b"" else "answered")
                except socket.timeout:
                    print("open")
                held[0].settimeout(10)
                print("dropped" if held[0].recv(1) == b"" else "answered", round(time.time() - began))
                """, "\(port)",
            ]
        )
        let lines = crowd.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "closed", "\(crowd.stdout)\(crowd.stderr)")
        #expect(lines.last == "dropped 2", "the header deadline: \(crowd.stdout)")

        // The held connections are gone with their process; the listener may need a moment to see it.
        var real = (exit: Int32(0), status: 0, body: "")
        try eventually {
            real = try Interactive.get(redirect)
            return real.status != 0
        }
        #expect(real.status == 200, "\(real.body)")
        let done = try call(connection, "login.complete", ["flow_id": flowID])
        #expect((done.object["subject"] as? String) == "1", "\(done)\n\(daemon.logText)")
        #expect(!daemon.logText.contains("forged-state-value"))
        try daemon.waitForLog("redirect refused: its state does not match", timeout: .seconds(10))
    }

    @Test("browser, RFC 9207: a redirect naming another issuer, or none, is refused; the right one works")
    func wrongIssuer() throws {
        let fixture = try setUp(iss: true)
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        for forgery in ["https://evil.example/o", nil] {
            let flow = try begin(connection, "web", "authorization_code")
            let redirect = try #require(
                Interactive.browser(server, authorizationURL: flow["authorization_url"] as? String ?? "", follow: false)["redirect"] as? String
            )
            #expect(Interactive.query("iss", of: redirect) == server.issuer, "the server sends iss")
            let refused = try Interactive.get(Interactive.replacing("iss", with: forgery, in: redirect))
            #expect(refused.status == 400)
            #expect(refused.body.contains("RFC 9207"))
            let reply = try call(connection, "login.complete", ["flow_id": flow["flow_id"] as? String ?? ""])
            #expect(reply.errorReason == "server_error", "\(reply)")
        }
        let flow = try begin(connection, "web", "authorization_code")
        let played = try Interactive.browser(server, authorizationURL: flow["authorization_url"] as? String ?? "")
        #expect(played["callback_status"] as? Int == 200)
        let done = try call(connection, "login.complete", ["flow_id": flow["flow_id"] as? String ?? ""])
        #expect((done.object["subject"] as? String) == "1", "\(done)")
    }

    @Test("browser: a code replayed into another sign-in is refused by the server (invalid_grant → login_required)")
    func replayedCode() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let server = fixture.server
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let first = try begin(connection, "web", "authorization_code")
        let firstRedirect = try #require(
            Interactive.browser(server, authorizationURL: first["authorization_url"] as? String ?? "", follow: false)["redirect"] as? String
        )
        #expect(try Interactive.get(firstRedirect).status == 200)
        #expect(try call(connection, "login.complete", ["flow_id": first["flow_id"] as? String ?? ""]).result != nil)
        #expect(try Interactive.get(firstRedirect).exit == 7, "the first flow's listener is gone")

        let second = try begin(connection, "web", "authorization_code")
        let secondRedirect = try #require(
            Interactive.browser(server, authorizationURL: second["authorization_url"] as? String ?? "", follow: false)["redirect"] as? String
        )
        let oldCode = try #require(Interactive.query("code", of: firstRedirect))
        let replay = try Interactive.get(Interactive.replacing("code", with: oldCode, in: secondRedirect))
        #expect(replay.status == 400)
        #expect(replay.body.contains("invalid_grant"))
        let reply = try call(connection, "login.complete", ["flow_id": second["flow_id"] as? String ?? ""])
        #expect(reply.errorReason == "login_required", "\(reply)")
        #expect(!daemon.logText.contains(oldCode))
    }

    // MARK: The CLI

    @Test("Ctrl-C in the CLI cancels the flow (joined from another client) and closes the listener")
    func ctrlCCancels() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let connection = try daemon.connect()
        let flow = try begin(connection, "web", "authorization_code")
        let flowID = try #require(flow["flow_id"] as? String)
        let redirect = try #require(Interactive.query("redirect_uri", of: flow["authorization_url"] as? String ?? ""))
        let (status, output) = try daemon.cliInterruptedOnTerminal(["login", "web", "--browser", "--no-browser"], after: "Ctrl-C cancels it")
        #expect(output.contains(flow["authorization_url"] as? String ?? "-"), "the CLI joined the pending flow")
        #expect(status == 130, "\(output)")
        #expect(output.contains("Sign-in to web cancelled."))
        let reply = try call(connection, "login.complete", ["flow_id": flowID])
        #expect(reply.errorReason == "login_cancelled")
        #expect(reply.errorMessage?.contains("cancelled") == true)
        #expect(try Interactive.get(redirect).exit == 7, "the listener closed")
        try daemon.waitForLog("sign-in cancelled", timeout: .seconds(10))
    }

    @Test("on a terminal the device flow draws a QR code of verification_uri_complete, module for module what python-qrcode encodes")
    func qrCode() throws {
        let fixture = try setUp()
        defer { withExtendedLifetime(fixture) {} }
        let daemon = fixture.daemon
        let (status, output) = try daemon.cliInterruptedOnTerminal(["login", "corp", "--device"], after: "Ctrl-C cancels it")
        #expect(status == 130)
        let complete = try #require(output.components(separatedBy: "scan this with your phone (").last?.components(separatedBy: ")").first)
        #expect(complete.contains("user_code="))
        // Reads the half-block drawing back into modules and finds the mask under which
        // python-qrcode's encoding of the same text (byte mode, level L) is identical.
        let script = #"""
            import json, sys, qrcode
            text, output = sys.argv[1], sys.argv[2]
            lines = [l.split("\x1b[30;47m", 1)[1].split("\x1b[0m", 1)[0] for l in output.splitlines() if "\x1b[30;47m" in l]
            top = {"█": (1, 1), "▀": (1, 0), "▄": (0, 1), " ": (0, 0)}
            rows = []
            for line in lines:
                pairs = [top[c] for c in line]
                rows.append([p[0] for p in pairs])
                rows.append([p[1] for p in pairs])
            quiet = 2
            size = len(lines[0]) - 2 * quiet
            drawn = [row[quiet:quiet + size] for row in rows[quiet:quiet + size]]
            version = (size - 17) // 4
            found = None
            for mask in range(8):
                qr = qrcode.QRCode(version=version, error_correction=qrcode.constants.ERROR_CORRECT_L, mask_pattern=mask, border=0)
                qr.add_data(qrcode.util.QRData(text.encode(), mode=qrcode.util.MODE_8BIT_BYTE))
                qr.make(fit=False)
                if [[1 if m else 0 for m in row] for row in qr.modules] == drawn:
                    found = mask
            print(json.dumps({"size": size, "mask": found}))
            """#
        let compared = try run(URL(fileURLWithPath: LoopbackServer.python), ["-c", script, complete, output])
        let result = try #require(try JSONSerialization.jsonObject(with: Data(compared.stdout.utf8)) as? [String: Any], "\(compared.stderr)")
        #expect((result["size"] as? Int ?? 0) >= 21)
        #expect(result["mask"] is Int, "the drawn QR code matches python-qrcode's under one of the 8 masks: \(result)")
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
private final class SharedResults: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Int: [String: Any]] = [:]
    func set(_ index: Int, _ value: [String: Any]?) { lock.withLock { values[index] = value } }
    func get(_ index: Int) -> [String: Any]? { lock.withLock { values[index] } }
}

/// What a test needs alive until its end: the scratch directory (the server's CA file lives
/// there), the authorization server and the daemon.
private final class Fixture {
    let scratch: ScratchDirectory
    let server: LoopbackServer
    let daemon: DaemonProcess

    init(scratch: ScratchDirectory, server: LoopbackServer, daemon: DaemonProcess) {
        self.scratch = scratch
        self.server = server
        self.daemon = daemon
    }
}
