import ArgumentParser
import AuthGateTools

/// `authgate provider test NAME`: a sign-in into a session of its own, then what the provider
/// gave it, one check a line (``ProviderTestReport``), and the sign-out.
struct ProviderTest: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Sign in to a provider and report what it gives: ID token, claims, scopes, lifetimes, refresh, userinfo, revocation, DPoP.",
        discussion: """
            Signs in with the provider's interactive grant as `authgate login` picks it (the \
            browser with PKCE on a desktop, else the device code), or with --client-credentials, \
            into the session "\(ProviderTestRun.sessionName)" (replaced if it exists; your other sessions are not \
            touched). Then the daemon forces a refresh and asks the userinfo endpoint, and the \
            session is signed out (revoked at the provider) unless --keep. One line per check: \
            ✓ passed, ! a warning (the daemon handles it; the line says what it means), ✗ failed \
            (something a user needs does not work), – not applicable, with the reason; --json \
            prints the same as one object (docs/PROVIDERS.md). No token is ever printed. Exit \
            status 0 when no check failed (warnings or not), 9 when one did; a sign-in that fails \
            exits as `authgate login` does.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The provider's id (see `authgate providers`).")
    var provider: String

    @OptionGroup var method: SignInMethodOptions

    @Flag(help: "Keep the test's session instead of signing it out.")
    var keep = false

    func validate() throws {
        if let problem = method.choice.problem(password: nil) { throw ValidationError(problem) }
    }

    func run() throws {
        let report = try ProviderTestRun(provider: provider, method: method.choice, keep: keep, daemon: global.daemon).run()
        if global.json {
            try global.printJSON(report)
        } else {
            print(report.text, terminator: "")
        }
        if !report.passed { throw ExitCode(ToolFailure.checkFailed) }
    }
}
