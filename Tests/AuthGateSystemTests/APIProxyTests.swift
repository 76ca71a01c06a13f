import AuthGateTestSupport
import Crypto
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `authgate proxy` as a process, between real clients (curl, a raw socket) and real upstreams
/// on loopback: the project's resource API (Tests/idp/resource_api.py, which reports what
/// reached it) for Bearer sessions of the mock provider, idpyoidc's DPoP-protected resource
/// over TLS (Tests/idp/idpy_server.py) for DPoP sessions, and a WebSocket echo server
/// (Tests/idp/ws_upstream.py) reached by Python's websockets client (ws_client.py).
@Suite("authgate proxy: any HTTP program gets the session's token", .serialized)
struct APIProxyTests {
    static let isRootWithSetpriv = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    static let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    static let curl = URL(fileURLWithPath: "/usr/bin/curl")

    /// A running `authgate proxy`, started as the daemon's CLI is, waited for until it listens.
    final class ProxyProcess: Sendable {
        let process: Process
        let output = SharedText()
        let log = SharedText()

        init(_ daemon: DaemonProcess, _ arguments: [String], environment: [String: String] = [:]) throws {
            process = Process()
            process.executableURL = BuiltProducts.cli
            process.arguments = ["proxy"] + arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment.merging(["AUTHGATE_SOCKET": daemon.socketPath]) { _, new in new }) {
                _,
                new in new
            }
            let out = Pipe()
            let errors = Pipe()
            process.standardOutput = out
            process.standardError = errors
            collect(out.fileHandleForReading, into: output)
            collect(errors.fileHandleForReading, into: log)
            try process.run()
            try eventually(timeout: .seconds(30), "authgate proxy did not listen; its log:\n\(log.text)") {
                if output.text.contains("\n") { return true }
                if !process.isRunning { throw StopWaiting(reason: "authgate proxy exited: \(log.text)") }
                return false
            }
        }

        /// What it printed: `127.0.0.1:PORT` or `unix:PATH`.
        var address: String { printed("listening on ") }
        var url: String { "http://" + address }
        /// Where `--metrics-listen` serves.
        var metricsURL: String { "http://" + printed("metrics on ") + "/metrics" }

        private func printed(_ prefix: String) -> String {
            let line = output.text.split(separator: "\n").first { $0.hasPrefix(prefix) } ?? ""
            return String(line.dropFirst(prefix.count))
        }

        /// The peak of its resident memory so far, in KiB (`VmHWM`).
        var peakKiB: Int {
            let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }

        func stop() throws -> Int32 {
            kill(process.processIdentifier, SIGTERM)
            return try waitForExit(process, outputs: [output, log], timeout: .seconds(30), "authgate proxy")
        }

        deinit {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
    }

    /// A Python script run as nobody (`asNobody`), until ``end()`` closes its input.
    final class NobodysScript {
        let process = Process()
        let output = SharedText()
        private let input = Pipe()

        init(_ script: String) throws {
            process.executableURL = URL(fileURLWithPath: APIProxyTests.asNobody[0])
            process.arguments = Array(APIProxyTests.asNobody.dropFirst()) + ["/usr/bin/python3", "-c", script]
            let out = Pipe()
            process.standardInput = input
            process.standardOutput = out
            collect(out.fileHandleForReading, into: output)
            try process.run()
        }

        func end() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    /// The daemon with a signed-in mock session, the resource API, and a proxy in front of it.
    struct Setup {
        let daemon: DaemonProcess
        let api: LoopbackServer
        let proxy: ProxyProcess

        init(_ extra: [String] = [], signIn: Bool = true) throws {
            daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
            if signIn { try daemon.signIn() }
            api = try LoopbackServer(script: "resource_api.py", workdir: daemon.scratch.path + "/api", arguments: [])
            proxy = try ProxyProcess(daemon, ["mock", "--upstream", "http://127.0.0.1:\(api.port)", "--listen", "127.0.0.1:0"] + extra)
        }

        var upstream: String { "http://127.0.0.1:\(api.port)" }

        /// The current token, as the daemon gives it.
        func token() throws -> String { try daemon.cli(["token", "mock"]).stdout.trimmingCharacters(in: .newlines) }

        /// The paths the API saw, and the fingerprint of the token each came with.
        func seen() throws -> [(path: String, token: String?)] {
            let body = try run(APIProxyTests.curl, ["-sS", upstream + "/_seen"]).stdout
            let records = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] ?? []
            return records.map { ($0["path"] as? String ?? "", $0["token"] as? String) }
        }
    }

    /// The first 12 hex digits of a value's SHA-256: how the resource API reports a token.
    static func fingerprint(_ value: String) -> String {
        SHA256.hash(data: Data(value.utf8)).map { String(format: "%02x", $0) }.joined().prefix(12).description
    }

    /// Sends `request` as it is on a new connection and reads until the server closes it or
    /// `timeout` passes: the raw answer.
    static func raw(_ request: String, port: Int, timeout: Int = 10) throws -> String {
        let connection = try RawConnection(port: port, timeout: timeout)
        connection.send(request)
        return connection.read { _ in false }
    }

    /// `curl -sS` through the proxy: the answer's status, its reason field and its body.
    static func get(_ url: String, _ arguments: [String] = [], prefix: [String] = []) throws -> (status: Int, reason: String?, body: String) {
        // The head on stdout too (-i): as another uid, curl may not open the test's /dev/stderr.
        let result = try run(curl, ["-sS", "-i"] + arguments + [url], prefix: prefix)
        let parts = result.stdout.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let reason = head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("authgate-reason:") }.map {
            $0.split(separator: " ").last.map(String.init) ?? ""
        }
        return (status, reason, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    static func json(_ text: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
    }

    // MARK: Bearer sessions

    @Test(
        "every request reaches the one upstream with the session's token as Bearer: an incoming Authorization, the Host, hop-by-hop fields and those Connection names are replaced or dropped, the rest and the body go on, the connection is kept alive, and no token is logged"
    )
    func bearerAdded() throws {
        let setup = try Setup()
        let token = try setup.token()
        let echo = try Self.get(
            setup.proxy.url + "/echo/a%2Fb?x=1&y=2",
            [
                "-H", "Authorization: Bearer someone-elses", "-H", "Connection: X-Private", "-H", "X-Private: 1", "-H", "X-Kept: yes", "-H",
                "Host: attacker.example",
            ]
        )
        #expect(echo.status == 200, "\(echo)")
        let seen = try Self.json(echo.body)
        let headers = seen["headers"] as? [String: Any] ?? [:]
        #expect(headers["authorization"] as? String == Self.fingerprint(token) && seen["authorization_scheme"] as? String == "Bearer", "\(seen)")
        #expect(headers["host"] as? String == "127.0.0.1:\(setup.api.port)")
        #expect(headers["x-kept"] as? String == "yes" && headers["x-private"] == nil && headers["connection"] as? String != "X-Private", "\(headers)")
        #expect(seen["path"] as? String == "/echo/a%2Fb" && seen["query"] as? String == "x=1&y=2", "\(seen)")

        // A body with Content-Length, and one chunked, go on whole; three requests, one connection.
        let posted = try Self.json(Self.get(setup.proxy.url + "/echo/post", ["-X", "POST", "--data-binary", "hello, upstream"]).body)
        #expect(posted["method"] as? String == "POST" && posted["body_bytes"] as? Int == 15)
        let chunked = try run(
            Self.curl,
            ["-sS", "-T", "-", "-H", "Transfer-Encoding: chunked", setup.proxy.url + "/upload"],
            stdin: String(repeating: "abc", count: 100_000)
        )
        let uploaded = try Self.json(chunked.stdout)
        #expect(uploaded["bytes"] as? Int == 300_000, "\(chunked)")
        let kept = try run(
            Self.curl,
            ["-sS", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects} "] + Array(repeating: setup.proxy.url + "/echo/k", count: 3)
        )
        #expect(kept.stdout.split(separator: " ") == ["1", "0", "0"], "one connection for three requests: \(kept.stdout)")

        #expect(try setup.proxy.stop() == 0)
        for text in [setup.proxy.log.text, setup.daemon.logText] {
            #expect(!text.contains(token) && !text.contains("someone-elses"))
        }
    }

    @Test(
        "a 401 refusing the token makes the daemon refresh the session once, and the request is sent once more with the new token; the client sees only the 200; the metrics count the retries"
    )
    func refusedTokenRetriedOnce() throws {
        let setup = try Setup(["--metrics-listen", "127.0.0.1:0"])
        let first = try setup.token()
        let answer = try Self.get(setup.proxy.url + "/once/revoked/x")
        #expect(answer.status == 200 && answer.body == "ok", "\(answer)")
        let second = try setup.token()
        #expect(second != first, "the daemon refreshed the refused token")
        let tokens = try setup.seen().filter { $0.path == "/once/revoked/x" }.map(\.token)
        #expect(tokens == [Self.fingerprint(first), Self.fingerprint(second)], "one retry, with the new token")

        // An API that refuses every token: the 401 is passed on after one retry, not a loop.
        let refused = try Self.get(setup.proxy.url + "/refuse/y")
        #expect(refused.status == 401 && refused.reason == nil)
        #expect(try setup.seen().filter { $0.path == "/refuse/y" }.count == 2)

        // What it did, for Prometheus: two retries with a new token, a 200 and a 401 passed on.
        let metrics = try run(Self.curl, ["-sS", setup.proxy.metricsURL]).stdout
        for line in [
            #"authgate_proxy_retries_total{cause="token"} 2"#, #"authgate_proxy_upstream_answers_total{class="2xx"} 1"#,
            #"authgate_proxy_upstream_answers_total{class="4xx"} 1"#, "authgate_proxy_requests_total 2",
        ] {
            #expect(metrics.contains(line + "\n"), "\(metrics)")
        }
        #expect(!metrics.contains(first) && !metrics.contains(second))
    }

    @Test(
        "requests for another origin and CONNECT are refused with their reasons and never reach anything; the upstream's own origin in absolute form is served, and an upgrade the upstream does not take is answered as it came, with the session's token and only Connection: Upgrade and Upgrade of the hop-by-hop fields sent; one with a body is answered, then its connection closes"
    )
    func notAnOpenProxy() throws {
        let setup = try Setup()
        let port = try #require(Int(setup.proxy.address.split(separator: ":").last ?? ""))
        let other = try Self.raw("GET http://evil.example/steal HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n", port: port)
        #expect(other.hasPrefix("HTTP/1.1 403") && other.contains("AuthGate-Reason: other_origin"), "\(other)")
        let tunnel = try Self.raw("CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", port: port)
        #expect(tunnel.hasPrefix("HTTP/1.1 405") && tunnel.contains("AuthGate-Reason: connect_refused"), "\(tunnel)")
        let upgrade = try Self.raw(
            "GET /echo/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            port: port
        )
        // http.server ignores the Upgrade: its 200 is passed on, and the connection closes after it.
        #expect(upgrade.hasPrefix("HTTP/1.1 200") && !upgrade.contains("AuthGate-Reason"), "\(upgrade)")
        let upgraded = try Self.json(String(upgrade.split(separator: "\r\n\r\n", maxSplits: 1).last ?? ""))
        let upgradeHeaders = upgraded["headers"] as? [String: Any] ?? [:]
        #expect(upgradeHeaders["upgrade"] as? String == "websocket" && upgradeHeaders["connection"] as? String == "Upgrade", "\(upgradeHeaders)")
        #expect(
            upgradeHeaders["authorization"] as? String == Self.fingerprint(try setup.token())
                && upgradeHeaders["host"] as? String == "127.0.0.1:\(setup.api.port)"
        )
        // With a body, an upgrade is an ordinary request, answered; NIO's parser stops after a
        // message that asked to upgrade, so the connection then closes instead of holding
        // whatever the client sends next (without the close, it held it all, without bound).
        let withBody = try RawConnection(port: port, timeout: 20)
        let asked = ContinuousClock.now
        withBody.send("POST /echo/body HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 1\r\n\r\nx")
        let answered = withBody.read { _ in false }
        #expect(answered.hasPrefix("HTTP/1.1 200"), "\(answered)")
        #expect(ContinuousClock.now - asked < .seconds(10), "the connection closed after the answer")
        let own = try Self.raw("GET \(setup.upstream)/echo/own HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", port: port)
        #expect(own.hasPrefix("HTTP/1.1 200"), "\(own)")
        #expect(try setup.seen().map(\.path).allSatisfy { !$0.contains("steal") && !$0.contains("ws") })
    }

    @Test(
        "a WebSocket upgrade passes through with the session's token in place of the client's: the 101 reaches the client, messages go both ways (a frame sent before the 101 too), a close from either side or --idle-timeout without a byte ends the tunnel, an upgrade the upstream refuses reaches the client as its 401, and the metrics count the tunnels"
    )
    func webSocketPassedThrough() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let upstream = try LoopbackServer(script: "ws_upstream.py", workdir: daemon.scratch.path + "/ws", arguments: [])
        let proxy = try ProxyProcess(
            daemon,
            ["mock", "--upstream", "http://127.0.0.1:\(upstream.port)", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]
        )
        let token = try daemon.cli(["token", "mock"]).stdout.trimmingCharacters(in: .newlines)
        let client = LoopbackServer.repository.appendingPathComponent("Tests/idp/ws_client.py").path
        func play(_ scenario: String, _ path: String) throws -> [String: Any] {
            let result = try run(URL(fileURLWithPath: LoopbackServer.python), [client, scenario, "ws://\(proxy.address)\(path)"])
            guard result.status == 0 else { throw TestFailure("ws_client.py \(scenario) failed: \(result.stderr)\nthe proxy's log:\n\(proxy.log.text)") }
            return try Self.json(result.stdout)
        }
        func seen() throws -> (upgrades: [[String: Any]], closed: Int) {
            let body = try Self.json(run(Self.curl, ["-sS", "http://127.0.0.1:\(upstream.port)/_seen"]).stdout)
            return (body["upgrades"] as? [[String: Any]] ?? [], body["closed"] as? Int ?? -1)
        }

        // The handshake, messages both ways (one of 200 000 bytes), and the token the upstream saw.
        let echo = try play("echo", "/ws/chat?room=1")
        #expect(echo["echoes"] as? [String] == ["one", "two", "three"] && echo["big"] as? Bool == true, "\(echo)")
        #expect(echo["whoami"] as? String == Self.fingerprint(token), "the session's token, not the client's: \(echo)")
        // The upstream closes (after a WebSocket close), then the client drops its connection.
        let byServer = try play("server-close", "/ws/bye")
        #expect(byServer["closed_by"] as? String == "server" && byServer["code"] as? Int == 1000, "\(byServer)")
        let byClient = try play("abort", "/ws/abort")
        #expect(byClient["echoes"] as? [String] == ["hello"], "\(byClient)")
        // A frame sent with the handshake, before the 101, is read with the request and sent on after it.
        let early = try play("early", "/ws/early")
        #expect(early["status"] as? Int == 101 && early["echo"] as? String == "early", "\(early)")
        try eventually(timeout: .seconds(10), "every tunnel ended upstream") { try seen().closed == 4 }
        try eventually(timeout: .seconds(10), "the proxy ended both kinds of tunnel:\n\(proxy.log.text)") {
            proxy.log.text.contains("tunnel closed: the client closed") && proxy.log.text.contains("tunnel closed: the upstream closed")
        }

        // Refused: the upstream's 401 reaches the client after the one retry with a new token.
        let refused = try play("refused", "/ws-refuse/x")
        #expect(refused["status"] as? Int == 401 && refused["reason"] is NSNull && refused["body"] as? String == "refused\n", "\(refused)")
        let upgrades = try seen().upgrades
        #expect(
            upgrades.map { $0["path"] as? String ?? "" } == ["/ws/chat", "/ws/bye", "/ws/abort", "/ws/early", "/ws-refuse/x", "/ws-refuse/x"],
            "\(upgrades)"
        )
        #expect(upgrades.prefix(4).allSatisfy { $0["token"] as? String == Self.fingerprint(token) && $0["upgrade"] as? Bool == true }, "\(upgrades)")
        #expect(!upgrades.contains { $0["token"] as? String == Self.fingerprint("forged-by-the-client") })

        // A tunnel where no byte moves either way is closed after --idle-timeout.
        let impatient = try ProxyProcess(daemon, ["mock", "--upstream", "http://127.0.0.1:\(upstream.port)", "--listen", "127.0.0.1:0", "--idle-timeout", "2"])
        let idle = try Self.json(run(URL(fileURLWithPath: LoopbackServer.python), [client, "idle", "ws://\(impatient.address)/ws/idle"]).stdout)
        let closedAfter = idle["closed_after"] as? Double ?? 0
        #expect(idle["echoes"] as? [String] == ["hello"] && closedAfter >= 1.5 && closedAfter < 10, "\(idle)")

        let metrics = try run(Self.curl, ["-sS", proxy.metricsURL]).stdout
        #expect(metrics.contains("authgate_proxy_upgrades_total 4\n") && metrics.contains("authgate_proxy_requests_total 5\n"), "\(metrics)")
        #expect(try proxy.stop() == 0)
        #expect(!proxy.log.text.contains(token) && !proxy.log.text.contains("forged-by-the-client"))
    }

    @Test(
        "a WebSocket upgrade to an https upstream goes over TLS verified with --ca-file, large messages intact both ways; without the CA the upgrade is answered 502 upstream_tls"
    )
    func webSocketOverTLS() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let upstream = try LoopbackServer(script: "ws_upstream.py", workdir: daemon.scratch.path + "/wss", arguments: ["--tls"])
        let origin = "https://127.0.0.1:\(upstream.port)"
        let proxy = try ProxyProcess(daemon, ["mock", "--upstream", origin, "--listen", "127.0.0.1:0", "--ca-file", upstream.caFile])
        let token = try daemon.cli(["token", "mock"]).stdout.trimmingCharacters(in: .newlines)
        let client = LoopbackServer.repository.appendingPathComponent("Tests/idp/ws_client.py").path
        let echo = try run(URL(fileURLWithPath: LoopbackServer.python), [client, "echo", "ws://\(proxy.address)/ws/tls"])
        let played = try Self.json(echo.stdout)
        #expect(played["big"] as? Bool == true && played["whoami"] as? String == Self.fingerprint(token), "\(echo)\n\(proxy.log.text)")

        let untrusting = try ProxyProcess(daemon, ["mock", "--upstream", origin, "--listen", "127.0.0.1:0"])
        let refused = try Self.json(run(URL(fileURLWithPath: LoopbackServer.python), [client, "refused", "ws://\(untrusting.address)/ws/tls"]).stdout)
        #expect(refused["status"] as? Int == 502 && refused["reason"] as? String == "upstream_tls", "\(refused)")
    }

    @Test(
        "the proxy's own answers: no session is 503 login_required naming the sign-in command, an unreachable upstream 502 upstream_unreachable, a sign-out login_required at once, a stopped daemon 503 daemon_unreachable"
    )
    func ownAnswers() throws {
        let setup = try Setup(signIn: false)
        let noSession = try Self.get(setup.proxy.url + "/echo/x")
        #expect(noSession.status == 503 && noSession.reason == "login_required" && noSession.body.contains("authgate login mock"), "\(noSession)")
        try setup.daemon.signIn()
        #expect(try Self.get(setup.proxy.url + "/echo/x").status == 200)
        setup.api.stop()
        let down = try Self.get(setup.proxy.url + "/echo/x")
        #expect(down.status == 502 && down.reason == "upstream_unreachable", "\(down)")
        // Signing out ends the token the proxy follows at once.
        _ = try setup.daemon.cli(["logout", "mock"])
        try eventually(timeout: .seconds(10)) { try Self.get(setup.proxy.url + "/echo/x").reason == "login_required" }
        setup.daemon.send(SIGTERM)
        _ = try setup.daemon.waitForExit()
        let noDaemon = try Self.get(setup.proxy.url + "/echo/x")
        #expect(noDaemon.status == 503 && noDaemon.reason == "daemon_unreachable", "\(noDaemon)")
    }

    @Test(
        "a plain-http upstream on loopback is reached directly even with http_proxy set: a proxy would read the token, and could not reach this host's loopback"
    )
    func plainUpstreamNeverThroughAProxy() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        try daemon.signIn()
        let api = try LoopbackServer(script: "resource_api.py", workdir: daemon.scratch.path + "/api", arguments: [])
        let nowhere = "http://127.0.0.1:\(try MetricsTests.freePort())"
        let proxy = try ProxyProcess(
            daemon,
            ["mock", "--upstream", "http://127.0.0.1:\(api.port)", "--listen", "127.0.0.1:0"],
            environment: ["http_proxy": nowhere, "HTTP_PROXY": nowhere, "all_proxy": nowhere, "ALL_PROXY": nowhere, "no_proxy": "", "NO_PROXY": ""]
        )
        let echo = try Self.get(proxy.url + "/echo/direct")
        #expect(echo.status == 200, "\(echo) \(proxy.log.text)")
    }

    // MARK: Hostile clients

    @Test(
        "hostile clients: an oversized head is refused and its connection closed, a head that trickles in is cut at --header-timeout, and the proxy serves the next client as before"
    )
    func hostileClients() throws {
        let setup = try Setup(["--header-timeout", "1"])
        let port = try #require(Int(setup.proxy.address.split(separator: ":").last ?? ""))
        let huge = try Self.raw("GET /echo/huge HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 200_000))\r\n\r\n", port: port)
        #expect(huge.hasPrefix("HTTP/1.1 4"), "\(huge.prefix(200))")
        #expect(try setup.seen().allSatisfy { $0.path != "/echo/huge" })

        // A head that never ends: the connection is closed by the proxy, not by the test's 10 s wait.
        let started = ContinuousClock.now
        let trickled = try Self.raw("GET /echo/slow HTTP/1.1\r\nHost: x\r\nX-Slow: 1", port: port)
        #expect(trickled.isEmpty && ContinuousClock.now - started < .seconds(8), "\(trickled)")
        #expect(try Self.get(setup.proxy.url + "/echo/after").status == 200)
    }

    @Test("a link or a file where --listen's socket should be is refused at start and left as it was; a socket another proxy listens on is not taken over")
    func socketPathTaken() throws {
        let setup = try Setup()
        let scratch = setup.daemon.scratch.path
        try setup.daemon.scratch.write("precious", "keep me\n")
        try FileManager.default.createSymbolicLink(atPath: scratch + "/api.sock", withDestinationPath: scratch + "/precious")
        let linked = try setup.daemon.cli(["proxy", "mock", "--upstream", setup.upstream, "--listen", "unix:\(scratch)/api.sock"])
        #expect(linked.status == 64 && linked.stderr.contains("exists and is not a socket"), "\(linked)")
        #expect(try String(contentsOfFile: scratch + "/precious", encoding: .utf8) == "keep me\n")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: scratch + "/api.sock")) == scratch + "/precious")

        let first = try ProxyProcess(setup.daemon, ["mock", "--upstream", setup.upstream, "--listen", "unix:\(scratch)/live.sock"])
        let second = try setup.daemon.cli(["proxy", "mock", "--upstream", setup.upstream, "--listen", "unix:\(scratch)/live.sock"])
        #expect(second.status == 64 && second.stderr.contains("something already listens"), "\(second)")
        #expect(try Self.get("http://x/echo/still", ["--unix-socket", scratch + "/live.sock"]).status == 200, "the first proxy still serves")
        _ = try first.stop()
    }

    // MARK: Who may use it

    @Test(
        "another uid is refused on the TCP port (403 caller_refused, nothing forwarded) unless --allow-uid names it, and then holds at most half the connections; on a Unix socket it cannot connect (0600), and with --group it connects and is refused by its uid",
        .enabled(if: isRootWithSetpriv, "needs root and setpriv to connect as nobody")
    )
    func otherUsersRefused() throws {
        let setup = try Setup()
        chmod(setup.daemon.scratch.path, 0o755)
        let refused = try Self.get(setup.proxy.url + "/echo/from-nobody", prefix: Self.asNobody)
        #expect(refused.status == 403 && refused.reason == "caller_refused" && refused.body.contains("65534"), "\(refused)")
        #expect(try setup.seen().isEmpty, "nothing reached the upstream")
        #expect(setup.proxy.log.text.contains("peer.uid=65534"))

        let allowing = try ProxyProcess(
            setup.daemon,
            ["mock", "--upstream", setup.upstream, "--listen", "127.0.0.1:0", "--allow-uid", "nobody", "--max-connections", "4"]
        )
        #expect(try Self.get(allowing.url + "/echo/allowed", prefix: Self.asNobody).status == 200)
        // An allowed uid holds at most half the connections: nobody's third is refused while it
        // holds two, and the proxy's own user is still served.
        let port = try #require(allowing.address.split(separator: ":").last)
        let holder = try NobodysScript(
            "import socket,sys\nheld=[socket.create_connection(('127.0.0.1',\(port))) for _ in range(2)]\nthird=socket.create_connection(('127.0.0.1',\(port)))\nthird.settimeout(5)\nprint(third.recv(200).split(b'\\r\\n')[0].decode(), flush=True)\nsys.stdin.read()"
        )
        try eventually(timeout: .seconds(20), "nobody's third connection got no answer: \(holder.output.text)") { holder.output.text.contains("\n") }
        #expect(holder.output.text.hasPrefix("HTTP/1.1 503"), "\(holder.output.text)")
        #expect(try Self.get(allowing.url + "/echo/owner").status == 200, "the owner is served while nobody holds its half")
        holder.end()

        let socket = setup.daemon.scratch.path + "/api.sock"
        let onSocket = try ProxyProcess(setup.daemon, ["mock", "--upstream", setup.upstream, "--listen", "unix:" + socket])
        var status = stat()
        #expect(stat(socket, &status) == 0 && status.st_mode & 0o777 == 0o600)
        #expect(try Self.get("http://x/echo/own", ["--unix-socket", socket]).status == 200)
        let cannot = try run(Self.curl, ["-sS", "--unix-socket", socket, "http://x/echo/nobody"], prefix: Self.asNobody)
        #expect(cannot.status == 7, "permission denied on connect: \(cannot)")
        _ = try onSocket.stop()

        let grouped = try ProxyProcess(setup.daemon, ["mock", "--upstream", setup.upstream, "--listen", "unix:" + socket, "--group", "nogroup"])
        let byUID = try Self.get("http://x/echo/grouped", ["--unix-socket", socket], prefix: Self.asNobody)
        #expect(byUID.status == 403 && byUID.reason == "caller_refused", "\(byUID)")
        #expect(try setup.seen().allSatisfy { !$0.path.contains("nobody") && !$0.path.contains("grouped") })
        _ = try grouped.stop()
    }

    @Test(
        "a refused uid opening 300 connections and leaving them open holds at most a few dozen of the proxy's descriptors and at most a log line a second, and the proxy's own user is served meanwhile",
        .enabled(if: isRootWithSetpriv, "needs root and setpriv to connect as nobody")
    )
    func refusedFloodHoldsLittle() throws {
        let setup = try Setup(["--metrics-listen", "127.0.0.1:0"])
        let pid = setup.proxy.process.processIdentifier
        func descriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0 }
        func refusedSoFar() throws -> Int {
            let metrics = try run(Self.curl, ["-sS", setup.proxy.metricsURL]).stdout
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("authgate_proxy_callers_refused_total ") } ?? ""
            return Int(line.split(separator: " ").last ?? "") ?? 0
        }
        let before = descriptors()
        let port = try #require(setup.proxy.address.split(separator: ":").last)
        let flood = try NobodysScript(
            "import socket,sys\nheld=[socket.create_connection(('127.0.0.1',\(port))) for _ in range(300)]\nprint('connected', flush=True)\nsys.stdin.read()"
        )
        defer { flood.end() }
        try eventually(timeout: .seconds(20), "nobody's connections: \(flood.output.text)") { flood.output.text.contains("connected") }
        // Once all 300 are refused, each answered refusal would hold its descriptor for 2 s more.
        try eventually(timeout: .seconds(20), "the proxy did not refuse the 300 connections") { try refusedSoFar() >= 300 }
        #expect(descriptors() - before <= 40, "\(descriptors() - before) descriptors more while nobody holds 300 connections")
        #expect(try Self.get(setup.proxy.url + "/echo/owner").status == 200)
        let logged = setup.proxy.log.text.components(separatedBy: "connection refused").count - 1
        #expect(logged <= 5, "\(logged) log lines for 300 refusals")
    }

    // MARK: DPoP sessions

    @Test(
        "DPoP: every request carries a fresh proof of its method and the upstream's URL, signed by the daemon (the resource refuses a proof used twice); a resource asking for a nonce gets it on one retry, and it is remembered; with --audience the exchanged token is sent"
    )
    func dpopProofPerRequest() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        let provider = idpyProvider(server, client: "authgate-dpop", grants: ["password"], extra: #", "dpop": "required""#)
        let daemon = try DaemonProcess(providers: ["corp.json": provider], logLevel: "info")
        try daemon.waitForLog("provider ready")
        try daemon.signIn("corp", username: "alice", password: "alice-password-1")
        let proxy = try ProxyProcess(daemon, ["corp", "--upstream", server.issuer, "--listen", "127.0.0.1:0", "--ca-file", server.caFile])
        func count(_ stats: [String: Any], _ name: String) -> Int { stats[name] as? Int ?? 0 }

        let before = try server.idpyStats()
        for _ in 0..<3 {
            let answer = try Self.get(proxy.url + "/resource", ["-H", "DPoP: forged"])
            #expect(answer.status == 200 && answer.body.contains("DPoP"), "\(answer)")
        }
        let after = try server.idpyStats()
        #expect(count(after, "resource_requests") == count(before, "resource_requests") + 3)
        #expect(count(after, "dpop_proofs") == count(before, "dpop_proofs") + 3 && count(after, "dpop_proofs_refused") == count(before, "dpop_proofs_refused"))

        // What makes a proof per request necessary: this resource takes each proof once.
        let resource = try #require(server.endpoints["resource"])
        let headers = try daemon.cli(["token", "corp", "--header", "--url", resource]).stdout.split(separator: "\n").map(String.init)
        #expect(try server.resource(headers).status == "200")
        #expect(try server.resource(headers).status == "401", "a replayed proof is refused")

        try server.setIdpyMode("resource-nonce")
        let beforeNonce = try server.idpyStats()
        #expect(try Self.get(proxy.url + "/resource").status == 200)
        #expect(try Self.get(proxy.url + "/resource").status == 200)
        let afterNonce = try server.idpyStats()
        #expect(count(afterNonce, "nonce_challenges") == count(beforeNonce, "nonce_challenges") + 1, "one challenge, then the nonce is remembered")
        #expect(count(afterNonce, "resource_requests") == count(beforeNonce, "resource_requests") + 3)
        #expect(count(afterNonce, "token_requests") == count(beforeNonce, "token_requests"), "a nonce is no reason to refresh")

        // --audience: a token exchanged for it (RFC 8693), cached by the daemon, sent instead.
        try server.setIdpyMode("normal")
        let exchanging = try ProxyProcess(
            daemon,
            ["corp", "--upstream", server.issuer, "--listen", "127.0.0.1:0", "--ca-file", server.caFile, "--audience", "https://api.example.test"]
        )
        let beforeExchange = try server.idpyStats()
        for _ in 0..<2 {
            let answer = try Self.get(exchanging.url + "/resource")
            // idpyoidc binds the exchanged token to the session's key as well (a proof came with the exchange).
            #expect(answer.status == 200 && answer.body.contains(#""token_type": "DPoP""#), "\(answer)")
        }
        #expect(try count(server.idpyStats(), "token_requests") == count(beforeExchange, "token_requests") + 1, "one exchange for both requests")
        #expect(try proxy.stop() == 0)
        let token = try daemon.cli(["token", "corp"]).stdout.trimmingCharacters(in: .newlines)
        #expect(!proxy.log.text.contains(token) && !daemon.logText.contains(token))
    }

    // MARK: Large bodies

    @Test(
        "an answer that comes slowly reaches the client as it comes: the head and the first event of a stream arrive while the upstream waits to send the next"
    )
    func slowAnswerStreamedAsItComes() throws {
        let setup = try Setup()
        let port = try #require(Int(setup.proxy.address.split(separator: ":").last ?? ""))
        let connection = try RawConnection(port: port, timeout: 10)
        connection.send("GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        let first = connection.read { $0.contains("data: one") }
        #expect(first.hasPrefix("HTTP/1.1 200") && first.contains("data: one") && !first.contains("data: two"), "\(first)")
        // The upstream sends its second event only now.
        #expect(try Self.get(setup.upstream + "/events/release").status == 200)
        let whole = connection.read { $0.hasSuffix("0\r\n\r\n") }
        #expect(whole.contains("data: two") && whole.hasSuffix("0\r\n\r\n"), "\(whole)")
    }

    @Test(
        "a client that goes away ends its exchange at once: the upstream sees its connection closed while it still waits to answer, instead of being held until the idle time"
    )
    func clientGoneEndsTheExchange() throws {
        let setup = try Setup()
        let port = try #require(Int(setup.proxy.address.split(separator: ":").last ?? ""))
        for _ in 0..<3 {
            let connection = try RawConnection(port: port, timeout: 10)
            connection.send("GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
            #expect(connection.read { $0.contains("data: one") }.contains("data: one"))
        }  // each connection closes here, the upstream still holding "two" back
        func abandoned() throws -> Int {
            try Self.json(Self.get(setup.upstream + "/events/abandoned").body)["abandoned"] as? Int ?? -1
        }
        try eventually(timeout: .seconds(10), "the upstream's exchanges went on after their clients left") { try abandoned() == 3 }
    }

    @Test(
        "upgrade threads are bounded by --max-connections, those whose client left before the upstream's answer ended included: one more is answered 503 too_many_upgrades until they end"
    )
    func upgradeThreadsBounded() throws {
        let setup = try Setup(["--max-connections", "2"])
        let port = try #require(Int(setup.proxy.address.split(separator: ":").last ?? ""))
        // http.server takes no upgrade: /events answers as it would, holding "two" back, and the
        // upgrade's thread waits for it even once its client has gone.
        let upgrade = "GET /events HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        for _ in 0..<2 {
            let connection = try RawConnection(port: port, timeout: 10)
            connection.send(upgrade)
            #expect(connection.read { $0.contains("data: one") }.contains("data: one"))
        }
        var last = ""
        try eventually(timeout: .seconds(10), "a third upgrade thread started: \(last)") {
            let third = try RawConnection(port: port, timeout: 10)
            third.send(upgrade)
            last = third.read { $0.contains("data: one") || $0.contains("\r\n\r\n") && $0.hasPrefix("HTTP/1.1 503") }
            return last.hasPrefix("HTTP/1.1 503") && last.contains("AuthGate-Reason: too_many_upgrades")
        }
        #expect(try Self.get(setup.upstream + "/events/release").status == 200)
        try eventually(timeout: .seconds(10), "the threads did not end") {
            let next = try RawConnection(port: port, timeout: 10)
            next.send(upgrade)
            return next.read { $0.contains("data: one") || $0.hasPrefix("HTTP/1.1 503") && $0.contains("\r\n\r\n") }.contains("data: one")
        }
    }

    @Test(
        "an HTTP/1.0 client that asks to be kept alive gets a body of unknown length ended by the connection's close (Connection: close), and one of known length on a connection kept alive"
    )
    func unframedAnswerToHTTP10Closes() throws {
        let setup = try Setup()
        let port = try #require(Int(setup.proxy.address.split(separator: ":").last ?? ""))
        // The upstream sends this one chunked: HTTP/1.0 has no way to tell its end but the close.
        let started = ContinuousClock.now
        let unframed = try Self.raw("GET /download?bytes=10&chunked=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", port: port)
        #expect(unframed.hasPrefix("HTTP/1.0 200") && unframed.lowercased().contains("connection: close"), "\(unframed)")
        #expect(unframed.hasSuffix("\r\n\r\n" + String(decoding: (0..<10).map { UInt8($0) }, as: UTF8.self)), "\(unframed)")
        #expect(ContinuousClock.now - started < .seconds(8), "the proxy closed the connection, not the test's wait")

        let connection = try RawConnection(port: port, timeout: 10)
        connection.send("GET /download?bytes=10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let framed = connection.read { $0.hasSuffix("\r\n\r\n" + String(decoding: (0..<10).map { UInt8($0) }, as: UTF8.self)) }
        #expect(framed.lowercased().contains("content-length: 10") && !framed.lowercased().contains("connection: close"), "\(framed)")
    }

    @Test("a gibibyte each way streams through with its bytes intact while the proxy's memory stays bounded")
    func gibibyteEachWay() throws {
        let setup = try Setup()
        let size = 1 << 30
        let file = setup.daemon.scratch.path + "/gibibyte"
        #expect(truncate(file, off_t(size)) == 0 || FileManager.default.createFile(atPath: file, contents: nil) && truncate(file, off_t(size)) == 0)
        let before = setup.proxy.peakKiB
        let up = try run(Self.curl, ["-sS", "-T", file, setup.proxy.url + "/upload"])
        let uploaded = try Self.json(up.stdout)
        let zeros = try run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [file]).stdout.prefix(64)
        #expect(uploaded["bytes"] as? Int == size && uploaded["sha256"] as? String == String(zeros), "\(up)")

        let shell = URL(fileURLWithPath: "/bin/sh")
        let down = try run(shell, ["-c", "/usr/bin/curl -sS '\(setup.proxy.url)/download?bytes=\(size)' | /usr/bin/sha256sum"])
        let pattern = try run(
            URL(fileURLWithPath: LoopbackServer.python),
            [
                "-c",
                "import hashlib\nh=hashlib.sha256()\nb=bytes(i % 251 for i in range(251*4096))\nn=\(size)\nwhile n:\n c=b[:min(n,len(b))]\n h.update(c)\n n-=len(c)\nprint(h.hexdigest())",
            ]
        )
        #expect(down.stdout.prefix(64) == pattern.stdout.prefix(64), "\(down) \(pattern)")
        let peak = setup.proxy.peakKiB
        #expect(peak < before + 64 * 1024, "the proxy's peak RSS went from \(before) KiB to \(peak) KiB for 2 GiB moved")
    }
}
