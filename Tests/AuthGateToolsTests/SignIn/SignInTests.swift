import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// The sign-in (SignIn) and registration (AccountRegistration) steps that need no terminal, in
/// process against a daemon of one answer per method; the built CLI runs the interactive ones
/// in InteractiveLoginTests and CredentialHelperTests.
@Suite("The sign-in and registration steps")
struct SignInTests {
    private static func login(_ provider: String, id: String) -> String {
        DaemonAnswers.result(LoginResult(provider: provider, session: "default", state: .authenticated, expiresAt: Date(), subject: "svc"), id: id)
    }

    @Test("a provider that offers only a service's grant is signed in to with it, as its client: no user name is asked for")
    func serviceGrant() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { method, id in
            method == "providers.list" ? DaemonAnswers.providers("svc", grants: [.clientCredentials], requestID: id) : Self.login("svc", id: id)
        }
        try SignIn(provider: "svc", session: nil, daemon: DaemonConnection(socket: daemon.path, json: true)).run()
        let login = try #require(daemon.requests.last)
        #expect(login.contains(#""method":"login""#) && login.contains(#""grant":"client_credentials""#), "\(login)")
        #expect(!login.contains("username"))
    }

    @Test("--device names the grant itself: the provider's offer is not asked for")
    func flagNamesTheGrant() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in DaemonAnswers.error(.unknownProvider, "no such provider", id: id) }
        let failure = #expect(throws: ToolFailure.self) {
            try SignIn(provider: "corp", session: nil, method: SignInChoice(device: true), daemon: DaemonConnection(socket: daemon.path, json: true)).run()
        }
        #expect(failure?.status == ToolFailure.providerUnusable)
        #expect(daemon.requests.count == 1 && daemon.requestText.contains(#""method":"login.begin""#) && daemon.requestText.contains(#""grant":"device_code""#))
    }

    @Test("register at an OpenID Connect provider whose file does not allow the browser sign-in is refused (status 6) before anything is asked")
    func registrationNeedsTheBrowser() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in DaemonAnswers.providers("corp", type: "oidc", grants: [.deviceCode], requestID: id) }
        let failure = #expect(throws: ToolFailure.self) {
            try AccountRegistration(
                provider: "corp",
                username: nil,
                email: nil,
                passwordStdin: false,
                session: nil,
                openBrowser: false,
                daemon: DaemonConnection(socket: daemon.path)
            ).run()
        }
        #expect(failure?.status == ToolFailure.providerUnusable && failure?.description.contains("[unsupported_grant]") == true)
    }
}
