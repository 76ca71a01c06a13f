import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A service's provider signs its sessions in on first use with the provider's one client,
/// shared by every uid: `nobody` asking for fresh session names as fast as it can must not make
/// the daemon flood the token endpoint, nor hold more sessions than its share. Against the test
/// identity provider over TLS, as `nobody`.
@Suite("First-use sign-ins against a flood", .serialized)
struct FirstUseFloodTests {
    static let isRootWithSetpriv = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    private static let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

    /// Python for `nobody`: asks the socket (argv[1]) for svc's token under argv[2] fresh session
    /// names (or, when argv[4] is `login`, signs each in with `login` and the client-credentials
    /// grant), each on its own connection, followed by a logout when argv[4] is `logout` or
    /// `login`, from argv[3] threads at once (within the uid's share of provider requests, which
    /// refuses more at once by itself), each asking as soon as its last answer came; prints each
    /// answer's reason (`ok` for a token or a session).
    private static let flood = #"""
        import json, socket, sys, threading
        path, count, threads, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        logout = mode in ("logout", "login")
        reasons = []
        def call(method, index):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            params = {"provider": "svc", "session": "s%d" % index}
            if method == "login": params["grant"] = "client_credentials"
            line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
            s.sendall(line.encode() + b"\n")
            answer = json.loads(s.makefile().readline())
            s.close()
            return answer
        def worker(first):
            for index in range(first, count, threads):
                answer = call("login" if mode == "login" else "token", index)
                reasons.append("ok" if "result" in answer else answer["error"]["data"]["reason"])
                if logout:
                    call("logout", index)
        workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for t in workers: t.start()
        for t in workers: t.join()
        print("\n".join(reasons))
        """#

    @Test(
        "nobody asking for 60 fresh sessions as fast as it can (signing each out again) reaches the provider at most a burst's worth of times, the rest refused with rate_limited and counted in the metrics, and as many logins with the service's grant are held to the same limit; its sessions never pass --max-sessions-per-user",
        .enabled(if: isRootWithSetpriv, "needs root and setpriv to call as nobody")
    )
    func floodIsBounded() throws {
        let scratch = try ScratchDirectory()
        chmod(scratch.path, 0o755)
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let service = #"""
            {"type": "oauth2", "endpoints": {"token": "\#(server.endpoints["token"] ?? "")"}, "client_id": "authgate-service",
             "client_secret_file": "\#(server.secretFile(client: "authgate-service"))", "grants": ["client_credentials"], "scopes": ["read"],
             "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        func start(_ arguments: [String] = []) throws -> DaemonProcess {
            let daemon = try DaemonProcess(providers: ["svc.json": service], arguments: ["--socket-group", "nogroup", "--max-connections", "1000"] + arguments)
            chmod(daemon.scratch.path, 0o755)
            try daemon.waitForLog("provider ready")
            return daemon
        }
        let daemon = try start()
        try scratch.write("flood.py", Self.flood)
        chmod(scratch.path + "/flood.py", 0o644)
        func signIns() -> Int { daemon.logText.components(separatedBy: "signed in on first use").count - 1 }

        /// `nobody`'s flood (`flood.py`) of 60 on two threads: each answer's reason, and how many
        /// sign-ins the limit allowed meanwhile (a burst of 10, then one a second:
        /// FirstUseSignIns.Limits).
        func flood(_ daemon: DaemonProcess, _ mode: String) throws -> (reasons: [String], allowed: Int) {
            let started = ContinuousClock.now
            let result = try run(
                URL(fileURLWithPath: Self.asNobody[0]),
                Array(Self.asNobody.dropFirst()) + ["/usr/bin/python3", scratch.path + "/flood.py", daemon.socketPath, "60", "2", mode]
            )
            let reasons = result.stdout.split(separator: "\n").map(String.init)
            #expect(reasons.count == 60, "\(result)")
            return (reasons, 10 + Int((ContinuousClock.now - started).components.seconds) + 1)
        }

        let (reasons, allowed) = try flood(daemon, "logout")
        #expect(reasons.filter { $0 == "ok" }.count <= allowed && reasons.contains("rate_limited"), "\(reasons)")
        try? eventually(timeout: .seconds(5)) { signIns() >= reasons.filter { $0 == "ok" }.count }
        #expect(signIns() <= allowed, "the provider was asked \(signIns()) times for 60 first uses")
        let metrics = try daemon.cli(["metrics"]).stdout
        #expect(
            metrics.contains(#"authgate_first_use_sign_ins_total{provider="svc",outcome="rate_limited"}"#),
            "\(reasons) \(metrics.split(separator: "\n").filter { $0.contains("first_use") || $0.contains("sign_ins_total") })"
        )

        // Signing in by name with the service's grant is held to the same limit (a fresh daemon:
        // a bucket of its own).
        let (logins, loginsAllowed) = try flood(try start(), "login")
        #expect(logins.filter { $0 == "ok" }.count <= loginsAllowed && logins.contains("rate_limited"), "\(logins)")

        // Twenty, four at a time, against a limit of four sessions: never more than four.
        let limited = try start(["--max-sessions-per-user", "4"])

        let kept = try run(
            URL(fileURLWithPath: Self.asNobody[0]),
            Array(Self.asNobody.dropFirst()) + ["/usr/bin/python3", scratch.path + "/flood.py", limited.socketPath, "20", "4", "keep"]
        )
        #expect(kept.stdout.contains("rate_limited"), "\(kept)")
        let status = try limited.cli(["status", "--all", "--json"])
        let sessions = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(sessions.filter { $0["uid"] as? Int == 65534 }.count == 4, "\(status.stdout)")
    }
}

/// A fleet's first requests spread: `refresh.first_use_spread_seconds` (the sign-ins' wait is
/// tested in process, FirstUseSignInsTests).
@Suite("First requests spread over a window after the daemon starts")
struct FirstUseSpreadTests {
    @Test(
        "a provider with first_use_spread_seconds is checked at start after a random wait it logs (0–300 s), unchecked until then, while one without it is ready at once and gives its token"
    )
    func startUpCheckWaits() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        func service(spread: Int?) -> String {
            #"""
            {"type": "oauth2", "endpoints": {"token": "\#(server.endpoints["token"] ?? "")"}, "client_id": "authgate-service",
             "client_secret_file": "\#(server.secretFile(client: "authgate-service"))", "grants": ["client_credentials"], "scopes": ["read"],
             "tls": {"ca_file": "\#(server.caFile)"}\#(spread.map { #", "refresh": {"first_use_spread_seconds": \#($0)}"# } ?? "")}
            """#
        }
        let started = ContinuousClock.now
        let daemon = try DaemonProcess(providers: ["spread.json": service(spread: 300), "plain.json": service(spread: nil)])
        try daemon.waitForLog("provider ready")
        try daemon.waitForLog("provider checked after a random wait")
        let delayed = try #require(
            daemon.logText.split(separator: "\n").first { $0.contains("provider checked after a random wait") && $0.contains("provider.id=spread") },
            "\(daemon.logText)"
        )
        let seconds = try #require(delayed.split(separator: " ").first { $0.hasPrefix("seconds=") }.flatMap { Double($0.dropFirst("seconds=".count)) })
        #expect((0...300).contains(seconds), "\(delayed)")
        #expect(!daemon.logText.contains("provider checked after a random wait (refresh.first_use_spread_seconds) provider.id=plain"))
        let providers = try daemon.cli(["providers"]).stdout
        let rows = providers.split(separator: "\n")
        #expect(rows.contains { $0.hasPrefix("plain ") && $0.contains(" ready ") }, "\(providers)")
        // Unchecked for as long as its wait lasts (which may be shorter than this test).
        if ContinuousClock.now - started < .seconds(seconds) {
            #expect(rows.contains { $0.hasPrefix("spread ") && $0.contains(" unchecked ") }, "\(providers)")
        }
        #expect(try daemon.cli(["token", "plain"]).status == 0)
    }
}
