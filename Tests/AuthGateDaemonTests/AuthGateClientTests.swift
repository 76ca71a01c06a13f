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
}
