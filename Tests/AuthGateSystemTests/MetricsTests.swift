import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The metrics through the real daemon and the real Prometheus tools: `promtool` checks the
/// exposition and the alert rules, a Prometheus server scrapes `--metrics-listen`.
@Suite("Metrics")
struct MetricsTests {
    static let promtool = "/usr/bin/promtool"
    static let prometheus = "/usr/bin/prometheus"
    static let hasPrometheus = FileManager.default.isExecutableFile(atPath: promtool) && FileManager.default.isExecutableFile(atPath: prometheus)

    /// Every family a small scenario must show.
    static let families = [
        "authgate_rpc_requests_total", "authgate_rpc_request_duration_seconds", "authgate_rpc_cached_answers_total",
        "authgate_provider_status", "authgate_provider_requests_total", "authgate_provider_request_duration_seconds",
        "authgate_sessions", "authgate_refreshes_total", "authgate_refresh_lateness_seconds", "authgate_refreshes_in_flight",
        "authgate_refreshes_waiting", "authgate_sign_ins_total", "authgate_login_flows_pending", "authgate_connections_open",
        "authgate_connections_refused_total", "authgate_session_store_writes_total", "authgate_session_store_write_duration_seconds",
        "authgate_build_info", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds", "process_cpu_seconds_total",
    ]

    /// A TCP port nobody listens on now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// `curl` on loopback: the status code and the body.
    static func get(_ url: String) throws -> (status: Int, body: String) {
        let output = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "-m", "5", "-w", "\n%{http_code}", url])
        let lines = output.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    /// The value of one series in an exposition text.
    static func value(_ text: String, _ series: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test(
        "after a small scenario every family is there, promtool accepts the text, values count what happened, nothing secret shows; a Prometheus server scrapes the same values",
        .enabled(if: hasPrometheus, "needs Debian's prometheus package (promtool, prometheus): scripts/test installs it")
    )
    func scenario() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let faulty = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
             "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        let port = try Self.freePort()
        let daemon = try DaemonProcess(
            providers: ["mock.json": Providers.shortLivedMock(2), "faulty.json": faulty],
            arguments: ["--metrics-listen", "127.0.0.1:\(port)", "--max-connections", "4"]
        )
        try daemon.waitForLog("provider ready")

        // Sign-ins: one good, one wrong password, one at a real provider.
        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login)")
        let wrong = try daemon.cli(["login", "mock", "--session", "w", "--username", "demo", "--password-stdin"], stdin: "not-the-password\n")
        #expect(wrong.status != 0)
        let remote = try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(remote.status == 0, "\(remote)")
        // Five token calls, answered on the event loop or by the dispatcher: all count as token/ok.
        var tokens: [String] = []
        for _ in 0..<5 {
            let token = try daemon.cli(["token", "mock", "--min-valid", "0"])
            #expect(token.status == 0, "\(token)")
            tokens.append(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let refused = try daemon.cli(["token", "nowhere"])
        #expect(refused.status != 0)
        // A refresh: 2 s tokens are refreshed in the background within a few seconds.
        try eventually(timeout: .seconds(30), "no background refresh was counted") {
            Self.value(try daemon.cli(["metrics"]).stdout, #"authgate_refreshes_total{provider="mock",outcome="ok"}"#) ?? 0 >= 1
        }
        // A refused connection: four held open (the limit), the fifth is told rate_limited. Each
        // sends a blank line, or the first-byte deadline (2 s) would close it before a loaded
        // machine got to count them.
        var held: [RPCConnection]? = try (0..<4).map { _ in
            let connection = try daemon.connect()
            try connection.send(Array("\n".utf8))
            return connection
        }
        try eventually(timeout: .seconds(30), "the four connections held were not counted open") {
            Self.value(try Self.get("http://127.0.0.1:\(port)/metrics").body, "authgate_connections_open") == 4
        }
        var fifth: RPCConnection? = try daemon.connect()
        #expect(try fifth.map(readReply)?.errorReason == "rate_limited")
        #expect(held?.count == 4)
        held = nil  // closed as they go
        fifth = nil
        #expect(held == nil && fifth == nil)
        try eventually(timeout: .seconds(30), "the connections closed were still counted open") {
            Self.value(try Self.get("http://127.0.0.1:\(port)/metrics").body, "authgate_connections_open") == 0
        }

        let text = try daemon.cli(["metrics"]).stdout
        for family in Self.families {
            #expect(text.contains("# TYPE \(family) "), "\(family) missing")
        }
        let check = try run(URL(fileURLWithPath: Self.promtool), ["check", "metrics"], stdin: text)
        #expect(check.status == 0 && check.stdout.isEmpty && check.stderr.isEmpty, "promtool: \(check)")
        #expect(Self.value(text, #"authgate_rpc_requests_total{method="token",outcome="ok"}"#) == 5)
        #expect(Self.value(text, #"authgate_rpc_requests_total{method="token",outcome="unknown_provider"}"#) == 1)
        #expect(Self.value(text, "authgate_rpc_cached_answers_total") ?? 0 >= 1, "the front door answered some")
        // Every answer timed once, those counted per batch at the front door too.
        #expect(Self.value(text, #"authgate_rpc_request_duration_seconds_count{method="token"}"#) == 6)
        #expect(Self.value(text, #"authgate_sign_ins_total{provider="mock",grant="password",outcome="ok"}"#) == 1)
        #expect(Self.value(text, #"authgate_sign_ins_total{provider="mock",grant="password",outcome="invalid_credentials"}"#) == 1)
        #expect(Self.value(text, #"authgate_sign_ins_total{provider="faulty",grant="password",outcome="ok"}"#) == 1)
        #expect(Self.value(text, #"authgate_provider_requests_total{provider="faulty",endpoint="discovery",outcome="2xx"}"#) ?? 0 >= 1)
        #expect(Self.value(text, #"authgate_provider_requests_total{provider="faulty",endpoint="token",outcome="2xx"}"#) == 1)
        #expect(Self.value(text, #"authgate_provider_status{provider="faulty",status="ready"}"#) == 1)
        #expect(Self.value(text, #"authgate_provider_status{provider="faulty",status="unchecked"}"#) == 0)
        #expect(Self.value(text, #"authgate_sessions{provider="mock",state="authenticated"}"#).map { $0 >= 0 } == true)
        #expect(Self.value(text, #"authgate_connections_refused_total{cause="limit"}"#) == 1)
        #expect(Self.value(text, "process_resident_memory_bytes") ?? 0 > 1_000_000)
        // No token, password, user name or uid in any label.
        for secret in tokens + ["demo-password-1", "alice-password-1", "not-the-password", "faulty-user", "uid="] {
            #expect(!text.contains(secret), "the metrics show \(secret.prefix(8))…")
        }
        #expect(!text.contains("user="), "no user label")

        // Served over HTTP too, with health and an unknown path.
        let scraped = try Self.get("http://127.0.0.1:\(port)/metrics")
        #expect(scraped.status == 200 && scraped.body.contains("authgate_build_info"))
        #expect(try Self.get("http://127.0.0.1:\(port)/healthz").status == 200)
        #expect(try Self.get("http://127.0.0.1:\(port)/readyz").status == 200)
        #expect(try Self.get("http://127.0.0.1:\(port)/nothing").status == 404)

        // A real Prometheus server scrapes it; its HTTP API answers with the token calls counted above.
        let prometheusPort = try Self.freePort()
        try scratch.write(
            "prometheus.yml",
            """
            global: {scrape_interval: 1s}
            scrape_configs:
              - job_name: authgate
                static_configs: [{targets: ["127.0.0.1:\(port)"]}]
            """
        )
        let prometheus = try BackgroundProcess(
            URL(fileURLWithPath: Self.prometheus),
            [
                "--config.file=\(scratch.path)/prometheus.yml", "--storage.tsdb.path=\(scratch.path)/tsdb",
                "--web.listen-address=127.0.0.1:\(prometheusPort)", "--log.level=warn",
            ]
        )
        defer { withExtendedLifetime(prometheus) {} }
        let query = "http://127.0.0.1:\(prometheusPort)/api/v1/query?query=authgate_rpc_requests_total%7Bmethod%3D%22token%22%2Coutcome%3D%22ok%22%7D"
        var answered = ""
        try eventually(timeout: .seconds(30)) {
            answered = try Self.get(query).body
            return answered.contains(#""value":["#)
        }
        #expect(answered.contains(#""5"]"#), "Prometheus's answer: \(answered)")
        #expect(try Self.get("http://127.0.0.1:\(prometheusPort)/api/v1/query?query=up%7Bjob%3D%22authgate%22%7D").body.contains(#""1"]"#))
        #expect(!daemon.logText.contains("demo-password-1"))
    }

    @Test("/readyz answers 503 while a provider is still being checked and 200 once it has settled; /healthz answers at once")
    func readiness() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "slow_discovery", delay: 3)
        let slow = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
             "tls": {"ca_file": "\#(server.caFile)"}, "timeouts": {"connect_ms": 1000, "total_ms": 10000}}
            """#
        let port = try Self.freePort()
        let daemon = try DaemonProcess(providers: ["slow.json": slow], arguments: ["--metrics-listen", "\(port)"])
        // The metrics listener binds a moment after the socket: /healthz answers once it does,
        // while discovery still has 3 s to go.
        try eventually { try Self.get("http://127.0.0.1:\(port)/healthz").status == 200 }
        let early = try Self.get("http://127.0.0.1:\(port)/readyz")
        #expect(early.status == 503, "\(early)")
        try eventually(timeout: .seconds(20)) { try Self.get("http://127.0.0.1:\(port)/readyz").status == 200 }
        try daemon.waitForLog("provider ready", timeout: .seconds(10))
    }

    @Test(
        "the listener's places: a newcomer to a full table (or to its address's full share) displaces the oldest connection without a request head; refused only when every place is answering"
    )
    func places() {
        var table = MetricsPlaces(maximum: 4, maximumPerPeer: 2)
        #expect(table.admit(peer: "a") == .admitted(id: 0, displacing: nil))
        #expect(table.admit(peer: "a") == .admitted(id: 1, displacing: nil))
        // a's share is full: its oldest idle place goes.
        #expect(table.admit(peer: "a") == .admitted(id: 2, displacing: 0))
        table.headReceived(1)
        table.headReceived(2)
        // a's two places are answering: a third from a is refused.
        #expect(table.admit(peer: "a") == .refused)
        #expect(table.admit(peer: "b") == .admitted(id: 3, displacing: nil))
        #expect(table.admit(peer: "c") == .admitted(id: 4, displacing: nil))
        // Full: the oldest idle place of anyone (b's) goes, not the answering ones.
        #expect(table.admit(peer: "d") == .admitted(id: 5, displacing: 3))
        #expect(table.places.map(\.id) == [1, 2, 4, 5])
        table.headReceived(4)
        table.headReceived(5)
        #expect(table.admit(peer: "e") == .refused, "every place is answering")
        table.leave(1)
        #expect(table.admit(peer: "e") == .admitted(id: 6, displacing: nil))
    }

    @Test(
        "a hog holding every place with idle connections from four loopback addresses, reopened as they close, does not starve /healthz: 10 probes answered within 40"
    )
    func hogDoesNotStarveProbes() throws {
        let port = try Self.freePort()
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--metrics-listen", "127.0.0.1:\(port)"])
        defer { withExtendedLifetime(daemon) {} }
        try eventually { try Self.get("http://127.0.0.1:\(port)/healthz").status == 200 }
        // 4 idle connections from each of 127.0.0.1–4, each reopened the moment it closes.
        let hog = Process()
        hog.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        hog.arguments = [
            "-c",
            """
            import select, socket, sys, time
            port, end = int(sys.argv[1]), time.monotonic() + 60
            def open_one(source):
                s = socket.socket(); s.bind((source, 0)); s.connect(('127.0.0.1', port)); return s
            held = {open_one('127.0.0.%d' % (1 + i // 4)): '127.0.0.%d' % (1 + i // 4) for i in range(16)}
            print('holding', flush=True)
            while time.monotonic() < end and sys.stdin.readable():
                ready, _, _ = select.select(list(held) + [sys.stdin], [], [], 0.05)
                if sys.stdin in ready: break
                for s in ready:
                    if s.recv(1) == b'':
                        source = held.pop(s); s.close()
                        try: held[open_one(source)] = source
                        except OSError: pass
            """,
            "\(port)",
        ]
        let input = Pipe()
        let output = Pipe()
        hog.standardInput = input
        hog.standardOutput = output
        try hog.run()
        defer {
            try? input.fileHandleForWriting.close()
            hog.waitUntilExit()
        }
        let line = output.fileHandleForReading.availableData
        #expect(String(decoding: line, as: UTF8.self).hasPrefix("holding"))
        // Not starved: 10 answers within 40 probes. A probe loses its place when the hog's
        // reopenings cycle through its address's share before it has sent its request (the
        // oldest place that has not goes first), which on a loaded machine (every test process
        // of the full run on two cores) happened to 11 of 20; a hog that starved them would
        // get none through.
        var answered = 0
        var probes = 0
        while answered < 10, probes < 40 {
            probes += 1
            if (try? Self.get("http://127.0.0.1:\(port)/healthz").status) == 200 { answered += 1 }
        }
        #expect(answered >= 10, "\(answered) of \(probes) probes answered")
        #expect(hog.isRunning, "the hog held on all along")
    }

    @Test("the metrics method is for administrators only")
    func adminsOnly() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--socket-group", "nogroup"])
        let asRoot = try daemon.cli(["metrics"])
        #expect(asRoot.status == 0 && asRoot.stdout.contains("# TYPE authgate_rpc_requests_total counter"), "\(asRoot)")
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return }
        chmod(daemon.scratch.path, 0o755)
        let asNobody = try daemon.cli(["metrics"], prefix: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        #expect(asNobody.status != 0 && asNobody.stderr.contains("may read the metrics"), "\(asNobody)")
        #expect(!asNobody.stdout.contains("authgate_"))
    }

    @Test(
        "promtool accepts the alert rules shipped in docs/prometheus",
        .enabled(if: hasPrometheus, "needs Debian's prometheus package (promtool): scripts/test installs it")
    )
    func rules() throws {
        let file = Repository.root.appendingPathComponent("docs/prometheus/authgate-rules.yml")
        let check = try run(URL(fileURLWithPath: Self.promtool), ["check", "rules", file.path])
        #expect(check.status == 0, "\(check)")
        #expect(check.stdout.contains("SUCCESS: 6 rules found"), "\(check)")
    }
}
