import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("authgated start-up, --check, --strict and logs")
struct DaemonLifecycleTests {
    private func providersDirectory(_ files: [String: String]) throws -> ScratchDirectory {
        let scratch = try ScratchDirectory()
        for (name, json) in files { try scratch.write(name, json) }
        return scratch
    }

    @Test("--check prints the report and exits 0 when every provider is ready")
    func checkGood() throws {
        let directory = try providersDirectory(["mock.json": Providers.mock])
        let result = try run(BuiltProducts.daemon, ["--check", "--providers", directory.path])
        #expect(result.status == 0)
        #expect(result.stdout == "mock      ready        \(directory.path)/mock.json\n1 provider in \(directory.path): 1 ready\n")
    }

    @Test("--check checks endpoints over the network and exits 1 when a provider is unreachable")
    func checkUnreachable() throws {
        let directory = try providersDirectory(["mock.json": Providers.mock, "corp.json": Providers.oidc])
        let result = try run(BuiltProducts.daemon, ["--check", "--providers", directory.path])
        #expect(result.status == 1)
        #expect(result.stdout.contains("corp      unreachable  \(directory.path)/corp.json\n    error: Cannot reach corp: cannot connect to 127.0.0.1:1"))
        #expect(result.stdout.contains("warning: \(directory.path)/corp.json: $.grants: the password grant is deprecated"))
        #expect(result.stdout.contains("2 providers in \(directory.path): 1 ready, 1 unreachable"))
    }

    @Test("--check names the file, the JSON path and what was expected, and exits 1")
    func checkBad() throws {
        let directory = try providersDirectory(["mock.json": Providers.mock, "broken.json": Providers.broken])
        let result = try run(BuiltProducts.daemon, ["--check", "--providers", directory.path])
        #expect(result.status == 1)
        #expect(
            result.stdout.contains(#"error: \#(directory.path)/broken.json: $.latency: unknown key for a provider of type "mock" (did you mean "latency_ms"?)"#)
        )
        #expect(result.stdout.contains("1 ready, 1 invalid"))
    }

    @Test("--check on a missing directory exits 2")
    func checkMissing() throws {
        let result = try run(BuiltProducts.daemon, ["--check", "--providers", "/nonexistent/providers.d"])
        #expect(result.status == 2)
        #expect(result.stdout.contains("/nonexistent/providers.d: no such directory"))
    }

    @Test("--strict refuses to start with an invalid provider; without it the others are served")
    func strict() throws {
        let scratch = try ScratchDirectory()
        let strict = try DaemonProcess(
            providers: ["mock.json": Providers.mock, "broken.json": Providers.broken],
            arguments: ["--strict"],
            waitUntilListening: false
        )
        #expect(try strict.waitForExit() == 1)
        #expect(strict.logText.contains("refusing to start"))
        #expect(!FileManager.default.fileExists(atPath: strict.socketPath))
        _ = scratch

        let lenient = try DaemonProcess(providers: ["mock.json": Providers.mock, "broken.json": Providers.broken])
        let login = try lenient.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
        #expect(login.status == 0)
    }

    @Test("a bad --log-level is a usage error")
    func badLogLevel() throws {
        let result = try run(BuiltProducts.daemon, ["--log-level", "loud"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--log-level must be one of"))
    }

    @Test("no token, refresh token or password ever reaches the log, even at trace level")
    func noSecretsInLogs() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.shortLivedMock(30)], logLevel: "trace")
        let password = "demo-password-1"
        var issued: [String] = []
        #expect(try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: password + "\n").status == 0)
        issued.append(try daemon.cli(["token", "mock"]).stdout)
        issued.append(try daemon.cli(["token", "mock", "--min-valid", "60"]).stdout)  // refresh with the refresh token
        issued.append(try daemon.cli(["token", "mock", "--force-refresh"]).stdout)
        _ = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "wrong-password\n")
        _ = try daemon.cli(["register", "mock", "--username", "erin", "--email", "e@example.com", "--password-stdin"], stdin: "erin-secret-123\n")
        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()

        let log = daemon.logText
        #expect(log.contains("signed in") && log.contains("session refreshed") && log.contains("signed out"), "the events are logged")
        #expect(Set(issued).count == 3)
        for token in issued.map({ $0.trimmingCharacters(in: .newlines) }) {
            #expect(!token.isEmpty && !log.contains(token))
        }
        #expect(!log.contains("mock_at_") && !log.contains("mock_rt_"), "no access or refresh token")
        for secret in [password, "wrong-password", "erin-secret-123"] {
            #expect(!log.contains(secret))
        }
    }
}
