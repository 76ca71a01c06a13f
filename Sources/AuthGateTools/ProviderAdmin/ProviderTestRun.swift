import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// `authgate provider test NAME`'s steps: a sign-in into a session of its own with the grant
/// `authgate login` would choose (``SignInChoice``), the daemon's inspection of what the
/// provider gave it (forced refresh, userinfo), and the sign-out unless kept; judged by
/// ``ProviderTestReport``.
package struct ProviderTestRun {
    /// The session the test signs in to, so that the user's own sessions stay as they are.
    package static let sessionName = "authgate-provider-test"

    package var provider: String
    package var method: SignInChoice
    /// Keep the test's session instead of signing it out.
    package var keep: Bool
    package var daemon: DaemonConnection

    package init(provider: String, method: SignInChoice, keep: Bool, daemon: DaemonConnection) {
        self.provider = provider
        self.method = method
        self.keep = keep
        self.daemon = daemon
    }

    /// Signs in, inspects and signs out; a failed inspection signs out before it is thrown.
    package func run() throws -> ProviderTestReport {
        let signIn = try signIn()
        let inspection: SessionInspection
        do {
            inspection = try daemon.call(
                .sessionInspect,
                SessionInspectParams(provider: provider, session: Self.sessionName, refresh: true, userinfo: true),
                as: SessionInspection.self,
                progress: "Refreshing and asking for the user's claims…"
            )
        } catch {
            if !keep { _ = try? signOut() }
            throw error
        }
        return ProviderTestReport(signIn: signIn, inspection: inspection, signOut: keep ? nil : try signOut())
    }

    /// The sign-in, as `authgate login` would run it, into the test's session; where login
    /// would ask for a password, the provider's service grant instead, if it has one.
    private func signIn() throws -> LoginResult {
        let grant = try method.grant(for: provider, userNamed: false, daemon: daemon)
        if let grant, grant.isInteractive {
            return try InteractiveLogin(
                daemon: daemon,
                provider: provider,
                grant: grant,
                session: Self.sessionName,
                openBrowser: !method.noBrowser,
                showQRCode: true
            ).signIn(beginAsJSON: false)
        }
        let serviceGrant = try grant.flatMap { $0.isService ? $0 : nil } ?? daemon.providers().first { $0.id == provider }?.grants.first(where: \.isService)
        guard let serviceGrant else {
            throw ToolFailure(
                "\(Terminal.safe(provider)) offers no interactive sign-in (browser or device code) and no client credentials to test with [unsupported_grant]",
                status: ToolFailure.providerUnusable
            )
        }
        let params = LoginParams(provider: provider, grant: serviceGrant, session: Self.sessionName)
        return try daemon.call(.login, params, as: LoginResult.self, progress: "Signing in to \(provider)…")
    }

    private func signOut() throws(ToolFailure) -> LogoutResult {
        try daemon.call(.logout, LogoutParams(provider: provider, session: Self.sessionName), as: LogoutResult.self, progress: "Signing out…")
    }
}
