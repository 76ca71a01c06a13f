package import AuthGateCore
package import AuthGateRPC
import FoundationEssentials

/// A sign-in with typed values: `authgate login`'s, and the point-of-use sign-in of the
/// credential helpers and `kubectl --setup` (``PointOfUseSignIn``), which need no argv. The
/// grant is ``SignInChoice``'s; a device-code or browser sign-in is an ``InteractiveLogin``,
/// the password grant asks for what was not given on the terminal.
package struct SignIn {
    package var provider: String
    package var session: String?
    package var username: String?
    package var passwordStdin: Bool
    package var scopes: [String]
    package var method: SignInChoice
    package var showQRCode: Bool
    /// `--confirm` / `--no-confirm`; `nil` leaves the session's choice as it is.
    package var confirm: Bool?
    package var daemon: DaemonConnection

    package init(
        provider: String,
        session: String?,
        username: String? = nil,
        passwordStdin: Bool = false,
        scopes: [String] = [],
        method: SignInChoice = SignInChoice(),
        showQRCode: Bool = true,
        confirm: Bool? = nil,
        daemon: DaemonConnection
    ) {
        self.provider = provider
        self.session = session
        self.username = username
        self.passwordStdin = passwordStdin
        self.scopes = scopes
        self.method = method
        self.showQRCode = showQRCode
        self.confirm = confirm
        self.daemon = daemon
    }

    /// Whether a user name or password was given: the password grant.
    private var userNamed: Bool { username != nil || passwordStdin }

    /// Signs in and prints the outcome (``report(_:daemon:verb:)``).
    package func run() throws {
        let grant = try method.grant(for: provider, userNamed: userNamed, daemon: daemon)
        if let grant, grant.isInteractive {
            return try InteractiveLogin(
                daemon: daemon,
                provider: provider,
                grant: grant,
                session: session,
                scopes: scopes,
                openBrowser: !method.noBrowser,
                showQRCode: showQRCode,
                verb: "Signed in to",
                confirm: confirm
            ).run()
        }
        if let grant, grant.isService {
            let params = LoginParams(provider: provider, grant: grant, session: session, scopes: scopes.isEmpty ? nil : scopes, confirm: confirm)
            let result = try daemon.call(.login, params, as: LoginResult.self, progress: "Signing in to \(provider)…")
            return try Self.report(result, daemon: daemon, verb: "Signed in to")
        }
        guard let username = username ?? (Terminal.stdinIsTerminal ? Terminal.ask("Username for \(provider): ") : nil) else {
            throw ToolFailure.usageError("Give --username (there is no terminal to ask on).")
        }
        let password = Terminal.readPassword(passwordStdin: passwordStdin, prompt: "Password for \(username) at \(provider): ")
        let params = LoginParams(
            provider: provider,
            grant: nil,
            username: username,
            password: Secret(password),
            session: session,
            scopes: scopes.isEmpty ? nil : scopes,
            confirm: confirm
        )
        let result = try daemon.call(.login, params, as: LoginResult.self, progress: "Signing in to \(provider)…")
        try Self.report(result, daemon: daemon, verb: "Signed in to")
    }

    /// Prints the outcome of a sign-in: a sentence on stdout (with the provider's notice, if
    /// any, on stderr), or the result as JSON under `--json`.
    /// - Parameter verb: How the line starts: "Signed in to" or "Registered and signed in to".
    package static func report(_ result: LoginResult, daemon: DaemonConnection, verb: String) throws {
        if daemon.json { return try DaemonConnection.printJSON(result) }
        // The name the user knows; the subject is often opaque ("1", a UUID).
        let who = (result.displayName ?? result.subject).map { " as \(Terminal.safe($0))" } ?? ""
        let session = result.session == "default" ? "" : " (session \(result.session))"
        print("\(verb) \(result.provider)\(who)\(session). The access token is \(Terminal.validity(result.expiresAt)).")
        if let notice = result.notice { Terminal.writeError("authgate: warning: \(Terminal.safe(notice))\n") }
    }
}

extension SignInChoice {
    /// The grant to sign in to `provider` with (``grant(userNamed:offered:at:)``), asking the
    /// daemon what the provider offers only when that decides.
    package func grant(for provider: String, userNamed: Bool, daemon: DaemonConnection) throws(ToolFailure) -> Grant? {
        var offered: [Grant] = []
        if needsOffer(userNamed: userNamed) {
            offered = try daemon.providers().first(where: { $0.id == provider })?.grants ?? []
        }
        return grant(userNamed: userNamed, offered: offered, at: .current(environment: ProcessInfo.processInfo.environment))
    }
}
