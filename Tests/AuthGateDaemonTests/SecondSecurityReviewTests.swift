import AuthGateCore
import AuthGateRPC
import Crypto
import Foundation
import Logging
import Testing

@testable import AuthGateDaemon
@testable import AuthGateOAuth

#if canImport(Glibc)
import Glibc
#endif

/// What the second security review (issue 26) found, each proven closed. Items 2 and 8 are in
/// ``TokenWatchTests``; items 9 and 11 with the sink and helper tests; item 1 in the Python
/// client's tests.
@Suite("Second security review", .serialized)
struct SecondSecurityReviewTests {
    static let login = #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#
    private static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    // MARK: 6. Files rotated in place

    @Test("item 6: a client key, client certificate, its key or CA file replaced in place makes the provider changed on reload")
    func rotatedFilesChangeTheProvider() async throws {
        let scratch = try ScratchDirectory()
        let files = ["key.pem", "ca.pem", "cert.pem", "tls-key.pem"]
        func write(_ name: String, _ text: String) throws {
            try scratch.write(name, text)
            chmod(scratch.path + "/" + name, 0o600)
        }
        try write("key.pem", P256.Signing.PrivateKey().pemRepresentation)
        try write("ca.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        try write("cert.pem", "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n")
        try write("tls-key.pem", P256.Signing.PrivateKey().pemRepresentation)
        let json = #"""
            {"type": "oauth2", "endpoints": {"token": "https://127.0.0.1:9/token"}, "client_id": "c", "grants": ["client_credentials"],
             "client_auth": "private_key_jwt", "client_key_file": "\#(scratch.path)/key.pem",
             "tls": {"ca_file": "\#(scratch.path)/ca.pem", "client_cert_file": "\#(scratch.path)/cert.pem", "client_key_file": "\#(scratch.path)/tls-key.pem"}}
            """#
        func load() -> RegisteredProvider {
            RegisteredProvider.make(ProviderConfigurationLoader.parse(Data(json.utf8), id: "svc", file: "svc.json"), logger: Self.quiet)
        }
        let registry = ProviderRegistry([load()])
        #expect(load().remote != nil, "\(load().statusReason ?? "")")
        #expect(load().hasSameDefinition(as: load()), "the same files are the same provider")
        for file in files {
            let replacement =
                file.hasSuffix("key.pem")
                ? P256.Signing.PrivateKey().pemRepresentation
                : "-----BEGIN CERTIFICATE-----\n\(UUID().uuidString)\n-----END CERTIFICATE-----\n"
            let before = load()
            try write(file, replacement)
            #expect(!before.hasSameDefinition(as: load()), "\(file) rotated")
            let changes = await registry.replace(with: [load()])
            #expect(changes.map(\.kind) == [.changed], "\(file): \(changes.map(\.kind))")
        }
    }

    // MARK: 7. Token exchange never hands out a refresh token

    @Test("item 7: requested_token_type naming a refresh token (or anything but an access token, JWT or ID token) is invalid_params before any request")
    func exchangeRefusesRefreshTokens() throws {
        for type in [TokenExchangePolicy.refreshToken, "urn:ietf:params:oauth:token-type:saml2", "urn:example:custom"] {
            let variant = TokenVariant(exchange: .init(audience: "api", requestedTokenType: type))
            #expect(throws: AuthGateError.self) { try variant.validate() }
            do { try variant.validate() } catch { #expect(error.reason == .invalidParams && error.message.contains("refresh token"), "\(error)") }
        }
        for type in TokenExchangePolicy.issuableTypes {
            try TokenVariant(exchange: .init(audience: "api", requestedTokenType: type)).validate()
        }
        // Through the socket, with no session and no request to any provider.
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let reply = try exchange(
            daemon.connect(),
            #"{"jsonrpc":"2.0","id":1,"method":"token.exchange","params":{"provider":"mock","audience":"api","requested_token_type":"\#(TokenExchangePolicy.refreshToken)"}}"#
        )
        #expect(reply.errorReason == "invalid_params", "\(reply)")
    }

    @Test("item 7: a refresh token issued by an exchange is refused, whatever was asked for")
    func issuedRefreshTokenRefused() throws {
        var issued = TokenSet(accessToken: Secret("rt"), expiresAt: Date().addingTimeInterval(60))
        issued.issuedTokenType = TokenExchangePolicy.refreshToken
        #expect(throws: AuthGateError.self) { try TokenExchangeGrant.issuedTokenType(issued, provider: "p") }
        issued.issuedTokenType = TokenExchangePolicy.jwt
        #expect(try TokenExchangeGrant.issuedTokenType(issued, provider: "p") == TokenExchangePolicy.jwt)
    }

    @Test("item 7: a provider file lists the audiences and token types token.exchange may ask for; a type it cannot allow is a config error")
    func exchangePolicyInTheFile() {
        let base = #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"]"#
        let report = ProviderConfigurationLoader.parse(
            Data((base + #", "token_exchange": {"audiences": ["https://api.example.com"], "requested_token_types": ["\#(TokenExchangePolicy.jwt)"]}}"#).utf8),
            id: "p",
            file: "p.json"
        )
        guard case .oauth2(let remote) = report.configuration?.settings else {
            Issue.record("\(report.problems)")
            return
        }
        #expect(remote.tokenExchange.audiences == ["https://api.example.com"] && remote.tokenExchange.requestedTokenTypes == [TokenExchangePolicy.jwt])
        let refused = ProviderConfigurationLoader.parse(
            Data((base + #", "token_exchange": {"requested_token_types": ["\#(TokenExchangePolicy.refreshToken)"]}}"#).utf8),
            id: "p",
            file: "p.json"
        )
        #expect(
            refused.problems.map(\.description).contains {
                $0.contains("$.token_exchange.requested_token_types[0]") && $0.contains("refresh token is never handed out")
            },
            "\(refused.problems)"
        )
    }

    // MARK: 10. Timeouts do not flood the log

    @Test("item 10: 100 silent connections closed by the first-byte deadline are one log line, then one summary")
    func timeoutsAreBatched() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let silent = try (0..<100).map { _ in try daemon.connect() }
        for connection in silent { #expect(try connection.receiveLine() == nil, "closed by the daemon") }
        // The log arrives through a pipe a moment after the closes: wait for the line, then count.
        try daemon.waitForLog("closing a connection: nothing arrived within")
        #expect(daemon.logText.components(separatedBy: "closing a connection: nothing arrived within").count - 1 == 1, "\(daemon.logText.suffix(3000))")
        try daemon.waitForLog("more connections closed by a deadline in the last 10 s", timeout: .seconds(15))
        #expect(daemon.logText.contains("connections.timed_out=99"), "\(daemon.logText.suffix(2000))")
    }

    // MARK: 12. DPoP proofs' parameters

    @Test("item 12: a nonce with a space is refused (RFC 9449 §8.1 NQCHAR is %x21-7E but quote and backslash)")
    func nonceCharacters() {
        #expect(!DPoPKey.isValidNonce("a b") && !DPoPKey.isValidNonce(" ") && !DPoPKey.isValidNonce("a\"b") && !DPoPKey.isValidNonce("a\\b"))
        #expect(DPoPKey.isValidNonce("eyJ7S_zG.eyJH0-Z.HX4w-7v") && DPoPKey.isValidNonce("!#[]~"))
    }

    @Test(
        "item 12: htu leaves out query, fragment and userinfo and is normalised as RFC 3986 §6.2.2 and §6.2.3 say",
        arguments: [
            ("https://user:secret@API.Example.COM:443/a/./b/../c?x=1#frag", "https://api.example.com/a/c"),
            ("HTTPS://api.example.com", "https://api.example.com/"),
            ("http://api.example.com:80/%7euser/%2f%41", "http://api.example.com/~user/%2FA"),
            ("https://api.example.com:8443/x/..", "https://api.example.com:8443/"),
            ("https://api.example.com/a//b/.", "https://api.example.com/a//b/"),
        ]
    )
    func targetURINormalised(_ input: String, _ expected: String) throws {
        #expect(DPoPKey.targetURI(try #require(URL(string: input))) == expected)
    }

    @Test("item 12: dpop.proof's parameters are checked before the session: a bad nonce is invalid_params with or without one")
    func proofParametersFirst() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let connection = try daemon.connect()
        let proof = #"{"jsonrpc":"2.0","id":2,"method":"dpop.proof","params":{"provider":"mock","htm":"GET","htu":"https://api.example.com/","nonce":"a b"}}"#
        #expect(try exchange(connection, proof).errorReason == "invalid_params")
        _ = try exchange(connection, Self.login)
        #expect(try exchange(connection, proof).errorReason == "invalid_params")
        let good = proof.replacingOccurrences(of: "a b", with: "ab")
        #expect(try exchange(connection, good).errorReason == "unsupported_grant", "a Bearer session: the parameters passed")
    }
}

/// Items 4 and 5: the HTTP metrics listener.
@Suite("Second security review: metrics listener", .serialized)
struct MetricsListenerReviewTests {
    private static func info(_ daemon: DaemonProcess) throws -> [String: Any]? {
        let output = try daemon.cli(["info", "--json"]).stdout
        return (try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])?["metrics_listener"] as? [String: Any]
    }

    @Test("item 4: a metrics port another process holds never stops the token service: logged, shown in daemon.info, bound once it is free")
    func heldPortIsRetried() throws {
        let port = try MetricsTests.freePort()
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(holder, 1) == 0)
        var held = true
        defer { if held { close(holder) } }

        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--metrics-listen", "127.0.0.1:\(port)"], logLevel: "info")
        try daemon.waitForLog("cannot serve metrics on 127.0.0.1:\(port)")
        try daemon.signIn()
        #expect(try daemon.cli(["token", "mock"]).status == 0, "tokens are served")
        let waiting = try #require(try Self.info(daemon))
        #expect(waiting["serving"] as? Bool == false && (waiting["error"] as? String)?.isEmpty == false, "\(waiting)")

        close(holder)
        held = false
        try eventually(timeout: .seconds(20)) { try MetricsTests.get("http://127.0.0.1:\(port)/healthz").status == 200 }
        #expect(try Self.info(daemon)?["serving"] as? Bool == true)
        #expect(daemon.isRunning)
    }

    @Test("item 4: the metrics socket systemd passes by name (authgated-metrics.socket, FileDescriptorName=metrics) is served")
    func namedSocketFromSystemd() throws {
        let scratch = try ScratchDirectory()
        let port = try MetricsTests.freePort()
        let activate = [
            LoopbackServer.python, ServiceTests.systemdScripts.appendingPathComponent("activate.py").path, scratch.path + "/s.sock",
            "--metrics", "\(port)",
        ]
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], scratch: scratch, launcher: activate)
        try daemon.waitForLog("listening on the socket systemd passed")
        try eventually { try MetricsTests.get("http://127.0.0.1:\(port)/healthz").status == 200 }
        #expect(try daemon.cli(["providers"]).status == 0)
    }

    @Test("item 5: the HTTP listener shows no provider ids or per-provider counts unless asked (--metrics-with-providers); the admin RPC shows them")
    func providerLabelsOnlyWhenAsked() throws {
        for withProviders in [false, true] {
            let port = try MetricsTests.freePort()
            let daemon = try DaemonProcess(
                providers: ["secret-corp.json": Providers.mock],
                arguments: ["--metrics-listen", "127.0.0.1:\(port)"] + (withProviders ? ["--metrics-with-providers"] : []),
                logLevel: "info"
            )
            #expect(try daemon.cli(["login", "secret-corp", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n").status == 0)
            try eventually { try MetricsTests.get("http://127.0.0.1:\(port)/healthz").status == 200 }
            let scraped = try MetricsTests.get("http://127.0.0.1:\(port)/metrics").body
            #expect(scraped.contains("authgate_rpc_requests_total"), "provider-agnostic families stay")
            #expect(scraped.contains("secret-corp") == withProviders, "\(scraped.prefix(400))")
            #expect(try daemon.cli(["metrics"]).stdout.contains(#"provider="secret-corp""#))
            if MetricsTests.hasPrometheus {
                let check = try run(URL(fileURLWithPath: MetricsTests.promtool), ["check", "metrics"], stdin: scraped)
                #expect(check.status == 0, "promtool: \(check)")
            }
        }
    }

    @Test(
        "item 5: one peer holds at most 4 of the listener's connections: a fifth displaces the oldest one that sent no request, at once (third review, item 3), and a silent one is closed by the 2 s head deadline"
    )
    func perPeerLimitAndHeadDeadline() throws {
        let port = try MetricsTests.freePort()
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--metrics-listen", "127.0.0.1:\(port)"], logLevel: "info")
        try eventually { try MetricsTests.get("http://127.0.0.1:\(port)/healthz").status == 200 }
        func open() throws -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try #require(connected == 0)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            return fd
        }
        let held = try (0..<4).map { _ in try open() }
        defer { for item in held { close(item) } }
        var byte: UInt8 = 0
        let opened = ContinuousClock.now
        // The listener accepts in the background, and the health check's connection may still
        // count for a moment: more connections are opened until the oldest held one is closed,
        // which must happen by the fifth one the listener holds, long before the head deadline.
        var probes: [Int32] = []
        defer { for item in probes { close(item) } }
        var displaced = false
        var quick = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(held[0], SOL_SOCKET, SO_RCVTIMEO, &quick, socklen_t(MemoryLayout<timeval>.size))
        try? eventually(timeout: .seconds(1.5)) {
            probes.append(try open())
            displaced = recv(held[0], &byte, 1, 0) == 0
            return displaced
        }
        #expect(displaced && probes.count <= 2 && ContinuousClock.now - opened < .seconds(2), "displaced after \(probes.count) more")
        let silent = try #require(probes.last)
        #expect(recv(silent, &byte, 1, 0) <= 0, "a silent one is closed by the head deadline")
        #expect(ContinuousClock.now - opened < .seconds(5))
        #expect(daemon.isRunning)
    }
}

/// Item 3, a suite of its own: it takes the daemon seconds of CPU, and the test shards are
/// filled suite by suite.
@Suite("Second security review: unread answers", .serialized)
struct UnreadAnswersReviewTests {
    // MARK: 3. Memory held by unread answers

    /// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
    private static func memory(_ pid: Int32, _ field: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix(field + ":") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    @Test("item 3: 60 connections pipelining token lines and never reading cost the daemon a few MiB, given back when they close")
    func unreadAnswersAreBounded() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "notice")
        let connection = try daemon.connect()
        _ = try exchange(connection, SecondSecurityReviewTests.login)
        // Warm the NIO path (two lines in one read are handed on) and the cached answers.
        try connection.send(Array((#"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"# + "\n").utf8) + Array("\n".utf8))
        _ = try connection.receiveLine()
        let before = try Self.memory(daemon.pid, "VmRSS")

        let line = Array((#"{"jsonrpc":"2.0","id":3,"method":"token","params":{"provider":"mock"}}"# + "\n").utf8)
        let chunk = Array(Array(repeating: line, count: 65_536 / line.count).joined())
        var attackers: [Int32] = []
        defer { for item in attackers { close(item) } }
        for _ in 0..<60 {
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { path in
                for (index, byte) in daemon.socketPath.utf8.enumerated() { path[index] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(connected == 0)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            attackers.append(descriptor)
        }
        // Each sends until the daemon stops taking its lines (or 4 MiB went through).
        var sent = [Int](repeating: 0, count: attackers.count)
        var stalled = Set<Int>()
        try eventually(timeout: .seconds(60)) {
            for (index, descriptor) in attackers.enumerated() where !stalled.contains(index) {
                while sent[index] < 4 << 20 {
                    let count = chunk.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if count <= 0 { break }
                    sent[index] += count
                }
                if sent[index] >= 4 << 20 || errno == EAGAIN { stalled.insert(index) }
            }
            return stalled.count == attackers.count
        }
        // The kernel took what it could at once; the daemon works through it until it has answered
        // all it will for clients that do not read: until its CPU time stands still.
        var cpu = try Self.cpuTicks(daemon.pid)
        var stillSince = ContinuousClock.now
        try eventually(timeout: .seconds(90)) {
            let now = try Self.cpuTicks(daemon.pid)
            if now != cpu { (cpu, stillSince) = (now, .now) }
            return ContinuousClock.now - stillSince > .milliseconds(500)
        }
        let during = try Self.memory(daemon.pid, "VmRSS")
        let peak = try Self.memory(daemon.pid, "VmHWM")
        #expect(sent.allSatisfy { $0 < 4 << 20 }, "the daemon stopped reading every connection")
        #expect(peak - before < 24 * 1024, "RSS \(before) KiB before, \(during) KiB during, \(peak) KiB at its peak")

        for item in attackers { close(item) }
        attackers = []
        try eventually(timeout: .seconds(60)) { try Self.memory(daemon.pid, "VmRSS") - before < 16 * 1024 }
        #expect(accessToken(try exchange(connection, #"{"jsonrpc":"2.0","id":4,"method":"token","params":{"provider":"mock"}}"#)) != nil)
    }

    /// The process's user and system CPU time, in clock ticks (/proc/PID/stat).
    private static func cpuTicks(_ pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        return try #require(Int(fields[11])) + #require(Int(fields[12]))
    }

    private func accessToken(_ reply: [String: Any]) -> String? { (reply.result as? [String: Any])?["access_token"] as? String }
}
