import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Crypto
import Foundation
import Logging
import Testing

@testable import AuthGateOAuth

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP metrics listener: a held port never stops the token service, systemd's named
/// socket, provider labels only when asked, and a peer's share of its places.
@Suite("Metrics listener: held ports, systemd sockets, provider labels, places per peer", .serialized)
struct MetricsListenerTests {
    private static func info(_ daemon: DaemonProcess) throws -> [String: Any]? {
        let output = try daemon.cli(["info", "--json"]).stdout
        return (try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])?["metrics_listener"] as? [String: Any]
    }

    @Test("a metrics port another process holds never stops the token service: logged, shown in daemon.info, bound once it is free")
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

    @Test("the metrics socket systemd passes by name (authgated-metrics.socket, FileDescriptorName=metrics) is served")
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

    @Test("the HTTP listener shows no provider ids or per-provider counts unless asked (--metrics-with-providers); the admin RPC shows them")
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
        "one peer holds at most 4 of the listener's connections: a fifth displaces the oldest one that sent no request, at once , and a silent one is closed by the 2 s head deadline"
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
