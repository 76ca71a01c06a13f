import ArgumentParser
import AuthGateCore
import AuthGateRPC
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
        if method.chosen > 1 {
            throw ValidationError("Choose one way to sign in: --device, --browser or --client-credentials.")
        }
    }

    func run() throws {
        let report = try ProviderTestRun(provider: provider, method: method.choice, keep: keep, daemon: global.daemon).run()
        if global.json {
            try global.printJSON(report)
        } else {
            print(Self.text(report), terminator: "")
        }
        if !report.passed { throw ExitCode(ToolFailure.checkFailed) }
    }

    /// One line per check: the mark, what was checked, the detail.
    static func text(_ report: ProviderTestReport) -> String {
        let labels = [
            "sign_in": "sign-in", "id_token": "ID token", "claims": "claims", "scopes": "scopes",
            "access_token_lifetime": "access token lifetime", "refresh_token": "refresh token", "refresh": "forced refresh",
            "userinfo": "userinfo", "revocation": "revocation", "dpop": "DPoP",
        ]
        let width = labels.values.map(\.count).max() ?? 0
        var text = ""
        for check in report.checks {
            let mark = ["pass": "✓", "warn": "!", "fail": "✗", "skip": "–"][check.outcome.rawValue] ?? "?"
            let label = labels[check.name] ?? check.name
            text += "\(mark) \(label)\(String(repeating: " ", count: width - label.count))  \(Terminal.safe(check.detail))\n"
        }
        func count(_ outcome: ProviderTestReport.Check.Outcome, _ noun: String) -> String {
            let number = report.checks.filter { $0.outcome == outcome }.count
            return "\(number) \(noun)\(number == 1 ? "" : "s")"
        }
        let warned = report.checks.contains { $0.outcome == .warn }
        switch (report.passed, warned) {
        case (true, false): text += "\(report.provider): every check passed.\n"
        case (true, true): text += "\(report.provider): no check failed; \(count(.warn, "warning")).\n"
        case (false, false): text += "\(report.provider): \(count(.fail, "check")) failed.\n"
        case (false, true): text += "\(report.provider): \(count(.fail, "check")) failed; \(count(.warn, "warning")).\n"
        }
        return text
    }
}
