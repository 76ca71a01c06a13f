import AuthGateClient
import AuthGateCore
import AuthGateRPC
import Foundation
import Testing

/// The Swift client library against the real daemon.
@Suite("AuthGateClient")
struct AuthGateClientTests {
    @Test("token, providers, status and tokenRejected; errors carry the daemon's reason; an absent daemon says so")
    func calls() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        #expect(try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n").status == 0)
        let client = AuthGateClient(socketPath: daemon.socketPath)
        let token = try await client.token(provider: "mock", minimumValidity: 60)
        #expect(token.accessToken.exposedValue.hasPrefix("mock_at_") && token.tokenType == "Bearer")
        #expect(try await client.providers().map(\.id) == ["mock"])
        #expect(try await client.status().map(\.provider) == ["mock"])
        let replaced = try await client.tokenRejected(provider: "mock", accessToken: token.accessToken)
        #expect(replaced.accessToken != token.accessToken)
        do {
            _ = try await client.token(provider: "mock", session: "never")
            Issue.record("a session nobody signed in to has no token")
        } catch {
            #expect(error.reason == .loginRequired && !error.isDaemonUnreachable)
        }
        do {
            _ = try await AuthGateClient(socketPath: daemon.scratch.path + "/nothing.sock").providers()
            Issue.record("nothing listens there")
        } catch {
            #expect(error.isDaemonUnreachable && error.reason == nil)
        }
    }

    @Test("watch: the token at once, a new one after each refresh, the session's end; a refused watch throws its reason; stopping closes the connection")
    func watch() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "debug")
        #expect(try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n").status == 0)
        let client = AuthGateClient(socketPath: daemon.scratch.path + "/s.sock")
        var events = client.watch(provider: "mock", minimumValidity: 0).makeAsyncIterator()
        guard case .token(let first)? = try await events.next() else { throw TestFailure("no first token") }
        #expect(first.accessToken == (try await client.token(provider: "mock")).accessToken)
        let rejected = try await client.tokenRejected(provider: "mock", accessToken: first.accessToken)
        guard case .token(let changed)? = try await events.next() else { throw TestFailure("no new token") }
        #expect(changed.accessToken == rejected.accessToken && changed.accessToken != first.accessToken)
        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        guard case .ended(let ended)? = try await events.next() else { throw TestFailure("no end") }
        #expect(ended.reason == .loggedOut)

        do {
            for try await _ in client.watch(provider: "nowhere") {}
            Issue.record("an unknown provider cannot be watched")
        } catch let error as AuthGateClientError {
            #expect(error.reason == .unknownProvider)
        }

        // A consumer that stops while the watch waits for news: its blocked read is interrupted
        // and the sequence ends.
        #expect(try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n").status == 0)
        let watching = Task {
            for try await _ in client.watch(provider: "mock") {}
        }
        try await until { daemon.logText.components(separatedBy: "token watch started").count - 1 == 2 }
        watching.cancel()
        #expect(await result(of: watching) != nil, "the cancelled watch ends")
    }
}
