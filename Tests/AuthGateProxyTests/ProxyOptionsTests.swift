import AuthGateClient
import AuthGateTestSupport
import Dispatch
import Logging
import Testing

@testable import AuthGateProxy

#if canImport(Glibc)
import Glibc
#endif

/// `authgate proxy`'s options made into what it serves, and its stop on a signal.
@Suite("The proxy's options as typed, resolved into what it serves")
struct ProxyOptionsTests {
    static func options(_ change: (inout ProxyOptions) -> Void = { _ in }) -> ProxyOptions {
        var options = ProxyOptions(provider: "corp", upstream: "https://api.example.com/v1", listen: "127.0.0.1:0")
        change(&options)
        return options
    }

    static func refusal(_ options: ProxyOptions) -> String? {
        do {
            _ = try ProxyConfiguration(resolving: options)
            return nil
        } catch {
            return error.message
        }
    }

    @Test("without --scope, --resource or --audience the session's own token is sent; with any of them a variant, scopes only when given")
    func variantOnlyWhenAsked() throws {
        #expect(try ProxyConfiguration(resolving: Self.options()).variant == nil)
        let audience = try ProxyConfiguration(resolving: Self.options { $0.audience = "api" })
        #expect(audience.variant == TokenVariantChoice(audience: "api", resource: nil, scopes: nil))
        let scoped = try ProxyConfiguration(resolving: Self.options { $0.scopes = ["read", "write"] })
        #expect(scoped.variant == TokenVariantChoice(audience: nil, resource: nil, scopes: ["read", "write"]))
    }

    @Test("the options go where the proxy reads them, the connections held to 1…4096 and the timeouts to at least a second")
    func valuesAndLimits() throws {
        let configuration = try ProxyConfiguration(
            resolving: Self.options {
                $0.session = "work"
                $0.metricsListen = "unix:/run/metrics.sock"
                $0.allowsRemoteCallers = true
                $0.minimumValidity = 90
                $0.maximumConnections = 0
                $0.idleSeconds = 0
                $0.headerSeconds = -5
            }
        )
        #expect(configuration.provider == "corp")
        #expect(configuration.session == "work")
        #expect(configuration.upstream.description == "https://api.example.com/v1")
        #expect(configuration.listen == .tcp(host: "127.0.0.1", port: 0))
        #expect(configuration.metricsListen == .unix(path: "/run/metrics.sock"))
        #expect(configuration.allowsRemoteCallers)
        #expect(configuration.minimumValidity == 90)
        #expect(configuration.maximumConnections == 1)
        #expect(configuration.idleSeconds == 1)
        #expect(configuration.headerSeconds == 1)
        #expect(try ProxyConfiguration(resolving: Self.options { $0.maximumConnections = 100_000 }).maximumConnections == 4096)
        #expect(try ProxyConfiguration(resolving: Self.options()).caBundle == nil)
    }

    @Test("--allow-uid and --group take a name (looked up first) or a number; an unknown name, or 4294967295 (-1), is refused naming the option")
    func usersAndGroups() throws {
        let configuration = try ProxyConfiguration(
            resolving: Self.options {
                $0.allowedUsers = ["root", "4242", "4242"]
                $0.group = "root"
            }
        )
        #expect(configuration.allowedUIDs == [0, 4242])
        #expect(configuration.socketGroup == 0)
        #expect(try ProxyConfiguration(resolving: Self.options { $0.group = "4343" }).socketGroup == 4343)
        #expect(Self.refusal(Self.options { $0.allowedUsers = ["no-such-user-here"] }) == "--allow-uid no-such-user-here: no such user")
        #expect(Self.refusal(Self.options { $0.allowedUsers = ["4294967295"] }) == "--allow-uid 4294967295: no such user")
        #expect(Self.refusal(Self.options { $0.group = "no-such-group-here" }) == "--group no-such-group-here: no such group")
    }

    @Test("--ca-file is read whole when it holds a PEM certificate; a missing file, one without a certificate or over 4 MiB is refused")
    func caFile() throws {
        let scratch = try ScratchDirectory()
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        try scratch.write("cas.pem", pem)
        try scratch.write("hostname", "example\n")
        try scratch.write("huge.pem", pem + String(repeating: "#", count: ProxyConfiguration.caFileLimit))
        let read = try ProxyConfiguration(resolving: Self.options { $0.caFile = scratch.path + "/cas.pem" })
        #expect(read.caBundle == Array(pem.utf8))
        #expect(Self.refusal(Self.options { $0.caFile = scratch.path + "/none.pem" }) == "--ca-file \(scratch.path)/none.pem: No such file or directory")
        #expect(Self.refusal(Self.options { $0.caFile = scratch.path + "/hostname" }) == "--ca-file \(scratch.path)/hostname holds no PEM certificate")
        #expect(Self.refusal(Self.options { $0.caFile = scratch.path + "/huge.pem" }) == "--ca-file \(scratch.path)/huge.pem is larger than 4 MiB")
    }

    @Test("an address is refused before users, the group or the CA file are looked at, and the sentence names the option")
    func firstRefusalWins() {
        let options = Self.options {
            $0.upstream = "http://api.example.com"
            $0.allowedUsers = ["no-such-user-here"]
        }
        #expect(Self.refusal(options)?.hasPrefix("--upstream must be https") == true)
        #expect(Self.refusal(Self.options { $0.metricsListen = "8080" })?.hasPrefix("--listen takes HOST:PORT") == true)
    }
}

@Suite("A proxy serves until the process's stop signal")
struct ProxyStopTests {
    /// What a signal descriptor gives for `signal`: a `signalfd_siginfo`, its number first.
    static func siginfo(_ signal: Int32) -> [UInt8] {
        withUnsafeBytes(of: UInt32(signal)) { Array($0) } + [UInt8](repeating: 0, count: 124)
    }

    @Test("SIGHUP is read and ignored; SIGTERM stops the listener and logs what the proxy did")
    func stopsOnSIGTERM() throws {
        let scratch = try ScratchDirectory()
        let log = SharedText()
        let logger = Logger(label: "test") { _ in RecordingLogHandler(log) }
        let configuration = try ProxyConfiguration(
            resolving: ProxyOptions(provider: "corp", upstream: "https://api.example.com", listen: "unix:\(scratch.path)/proxy.sock")
        )
        let server = try ProxyServer(configuration: configuration, client: AuthGateClient(socketPath: scratch.path + "/daemon.sock"), logger: logger)
        server.start()
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let done = DispatchSemaphore(value: 0)
        let signals = ends[0]
        DispatchQueue.global().async {
            server.serve(untilStoppedBy: signals)
            done.signal()
        }
        #expect(write(ends[1], Self.siginfo(SIGHUP), 128) == 128)
        #expect(done.wait(timeout: .now() + 0.2) == .timedOut)
        #expect(!log.text.contains("authgate proxy stopped"))
        #expect(write(ends[1], Self.siginfo(SIGTERM), 128) == 128)
        close(ends[1])
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(log.text.contains("notice authgate proxy stopped"))
        #expect(log.text.contains("proxy.requests"))
        #expect(!log.text.contains("other machines can reach"))
    }
}
