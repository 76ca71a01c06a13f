import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The browser (authorization code) sign-ins: success, denial, a wrong state or issuer, a
/// replayed code, Ctrl-C, the terminal QR code of the device flow.
extension InteractiveLoginTests {
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
                time.sleep(0.3)  # on purpose: the listener accepts the 32 before the 33rd arrives (nothing outside shows it)
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
}
