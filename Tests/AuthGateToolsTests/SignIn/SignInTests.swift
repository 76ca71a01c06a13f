import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateTools

#if canImport(Glibc)
import Glibc
#endif

/// The sign-in (SignIn) and registration (AccountRegistration) steps that need no terminal, in
/// process against a daemon of one answer per method; the built CLI runs the interactive ones
/// in InteractiveLoginTests and CredentialHelperTests.
@Suite("The sign-in and registration steps")
struct SignInTests {
    private static func login(_ provider: String, id: String) -> String {
        DaemonAnswers.result(LoginResult(provider: provider, session: "default", state: .authenticated, expiresAt: Date(), subject: "svc"), id: id)
    }

    @Test("the browser is started with no descriptor of the tool's but /dev/null as its input and output: a helper's pipes to git close when the helper ends")
    func browserGetsNoDescriptorOfOurs() throws {
        let scratch = try ScratchDirectory()
        let listing = scratch.path + "/descriptors"
        let script = scratch.path + "/opener.sh"
        try "ls /proc/$$/fd > \(listing).tmp && mv \(listing).tmp \(listing)\n".write(toFile: script, atomically: true, encoding: .utf8)
        // What git's helper holds: descriptors without close-on-exec (its saved pipes), above
        // any the shell opens for itself (dash reads its script on fd 10).
        var made: [Int32] = [0, 0]
        #expect(pipe(&made) == 0)
        let pipeEnds = made.map { fcntl($0, F_DUPFD, 200) }
        for end in made { close(end) }
        defer { for end in pipeEnds { close(end) } }
        #expect(pipeEnds.allSatisfy { $0 >= 200 })

        // The shell is the opener, the script its "URL": a file just written is not executed
        // itself (another test's child may hold it open for a moment: ETXTBSY).
        InteractiveLogin.openInBrowser(script, opener: "/bin/sh")
        try eventually { FileManager.default.fileExists(atPath: listing) }
        let open = try String(contentsOfFile: listing, encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
        #expect(open.contains(0) && open.contains(2))
        #expect(!open.contains(pipeEnds[0]) && !open.contains(pipeEnds[1]), "the opener holds \(open), ours were \(pipeEnds)")
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
