import AuthGateCore
import AuthGateRPC

/// `authgate register`: an account made at the provider and signed in to. An OpenID Connect
/// provider registers people on its own sign-up page (the browser sign-in with
/// `prompt=create`); any other is given the user name, email address and password, asked for
/// on the terminal or read from stdin (`--password-stdin`: the password, then its confirmation).
package struct AccountRegistration {
    package var provider: String
    package var username: String?
    package var email: String?
    package var passwordStdin: Bool
    package var session: String?
    /// Try to open the sign-up page in a browser (`--no-browser` not given).
    package var openBrowser: Bool
    package var daemon: DaemonConnection

    package init(
        provider: String,
        username: String?,
        email: String?,
        passwordStdin: Bool,
        session: String?,
        openBrowser: Bool,
        daemon: DaemonConnection
    ) {
        self.provider = provider
        self.username = username
        self.email = email
        self.passwordStdin = passwordStdin
        self.session = session
        self.openBrowser = openBrowser
        self.daemon = daemon
    }

    package func run() throws {
        // OpenID Connect providers register people on their own sign-up page ("Initiating User
        // Registration"): the browser sign-in with prompt=create, which signs the new user in.
        let providers = try daemon.providers()
        if let info = providers.first(where: { $0.id == provider }), info.type == "oidc" {
            guard info.grants.contains(.authorizationCode) else {
                throw ToolFailure(
                    "\(provider) cannot register people here: its file does not allow the authorization_code grant. [unsupported_grant]",
                    status: ToolFailure.providerUnusable
                )
            }
            return try InteractiveLogin(
                daemon: daemon,
                provider: provider,
                grant: .authorizationCode,
                session: session,
                prompt: "create",
                openBrowser: openBrowser,
                showQRCode: false,
                verb: "Registered and signed in to"
            ).run()
        }
        let interactive = Terminal.stdinIsTerminal && !passwordStdin
        guard let username = username ?? (interactive ? Terminal.ask("New user name at \(provider): ") : nil) else {
            throw ToolFailure.usageError("Give --username (there is no terminal to ask on).")
        }
        guard let email = email ?? (interactive ? Terminal.ask("Email address: ") : nil) else {
            throw ToolFailure.usageError("Give --email (there is no terminal to ask on).")
        }
        let password: String
        let confirmation: String
        if passwordStdin {
            password = Terminal.readSecretFromStdin() ?? ""
            confirmation = Terminal.readSecretFromStdin() ?? password
        } else {
            password = Terminal.readPassword(passwordStdin: false, prompt: "New password: ")
            confirmation = Terminal.readPassword(passwordStdin: false, prompt: "Repeat the password: ")
        }
        let params = RegisterParams(
            provider: provider,
            username: username,
            email: email,
            password: Secret(password),
            passwordConfirmation: Secret(confirmation),
            session: session
        )
        let result = try daemon.call(.register, params, as: LoginResult.self, progress: "Creating your account at \(provider)…")
        try SignIn.report(result, daemon: daemon, verb: "Registered and signed in to")
    }
}
