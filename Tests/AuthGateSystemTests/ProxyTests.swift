import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Provider traffic through an HTTP proxy: libcurl takes `HTTPS_PROXY` and
/// `NO_PROXY` from the daemon's environment. A real proxy on loopback (Debian's tinyproxy)
/// between the daemon and the real authorization server: discovery, sign-in and refresh go
/// through it as `CONNECT` tunnels, and TLS is verified end to end against the provider's CA.
@Suite("Provider traffic through an HTTP proxy")
struct ProxyTests {
    static let tinyproxy = "/usr/bin/tinyproxy"

    @Test(
        "with HTTPS_PROXY the daemon's discovery, sign-in and refresh go through tinyproxy as CONNECT tunnels only, TLS verified end to end; NO_PROXY bypasses it",
        .enabled(if: FileManager.default.isExecutableFile(atPath: tinyproxy), "needs Debian's tinyproxy: scripts/test installs it")
    )
    func throughTinyproxy() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.identityProvider(workdir: scratch.path + "/idp")
        let port = try MetricsTests.freePort()
        let log = scratch.path + "/tinyproxy.log"
        try scratch.write(
            "tinyproxy.conf",
            """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            LogFile "\(log)"
            LogLevel Info
            MaxClients 50
            Allow 127.0.0.1

            """
        )
        let proxy = Process()
        proxy.executableURL = URL(fileURLWithPath: Self.tinyproxy)
        proxy.arguments = ["-d", "-c", scratch.path + "/tinyproxy.conf"]
        proxy.standardOutput = FileHandle.nullDevice
        proxy.standardError = FileHandle.nullDevice
        try proxy.run()
        defer {
            // tinyproxy waits for its tunnels on SIGTERM; nothing of it is needed any more.
            kill(proxy.processIdentifier, SIGKILL)
            proxy.waitUntilExit()
        }
        try eventually { (try? String(contentsOfFile: log, encoding: .utf8))?.contains("listening on fd") == true }
        let provider = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate-password", "grants": ["password"],
             "scopes": ["openid", "profile", "email"], "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        let proxied = ["HTTPS_PROXY": "http://127.0.0.1:\(port)", "https_proxy": "http://127.0.0.1:\(port)", "NO_PROXY": "", "no_proxy": ""]
        let daemon = try DaemonProcess(providers: ["corp.json": provider], environment: proxied)
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        let refreshed = try daemon.cli(["token", "corp", "--force-refresh"])
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        let origin = try #require(URL(string: server.issuer))
        let target = "\(origin.host ?? "127.0.0.1"):\(origin.port ?? 443)"
        let requests = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n").filter { $0.contains("Request (file descriptor") }
        // Discovery, the JWKS, the sign-in and the refresh: each a tunnel to the provider.
        #expect(requests.count >= 4, "\(requests)")
        #expect(requests.allSatisfy { $0.hasSuffix("CONNECT \(target) HTTP/1.1") }, "only CONNECT tunnels: \(requests)")

        // NO_PROXY naming the provider's host: straight there, the proxy sees nothing more.
        var bypass = proxied
        (bypass["NO_PROXY"], bypass["no_proxy"]) = (origin.host, origin.host)
        let direct = try DaemonProcess(providers: ["corp.json": provider], environment: bypass)
        try direct.waitForLog("provider ready")
        #expect(try direct.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let after = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n").filter { $0.contains("Request (file descriptor") }
        #expect(after.count == requests.count, "NO_PROXY bypassed the proxy")
    }
}
