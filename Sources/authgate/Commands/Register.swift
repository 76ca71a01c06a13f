import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Register: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create an account at a provider and sign in to it.",
        discussion: "With --password-stdin, the first line of stdin is the password and the second (if any) its confirmation."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The provider's id.")
    var provider: String

    @Option(help: "The new user name (asked for when absent).")
    var username: String?

    @Option(help: "Your email address (asked for when absent).")
    var email: String?

    @Flag(name: .customLong("password-stdin"), help: "Read the password from stdin instead of asking.")
    var passwordStdin = false

    @Option(help: "Name of the session to sign in to.")
    var session: String?

    @Flag(name: .customLong("no-browser"), help: "OpenID Connect providers: do not try to open the browser; just print the URL.")
    var noBrowser = false

    func run() throws {
        // OpenID Connect providers register people on their own sign-up page ("Initiating User
        // Registration"): the browser sign-in with prompt=create, which signs the new user in.
        let providers = try global.daemon.providers()
        if let info = providers.first(where: { $0.id == provider }), info.type == "oidc" {
            guard info.grants.contains(.authorizationCode) else {
                throw ToolFailure(
                    "\(provider) cannot register people here: its file does not allow the authorization_code grant. [unsupported_grant]",
                    status: ToolFailure.providerUnusable
                )
            }
            return try InteractiveLogin(
                daemon: global.daemon,
                provider: provider,
                grant: .authorizationCode,
                session: session,
                prompt: "create",
                openBrowser: !noBrowser,
                showQRCode: false,
                verb: "Registered and signed in to"
            ).run()
        }
        let interactive = Terminal.stdinIsTerminal && !passwordStdin
        guard let username = username ?? (interactive ? Terminal.ask("New user name at \(provider): ") : nil) else {
            throw ValidationError("Give --username (there is no terminal to ask on).")
        }
        guard let email = email ?? (interactive ? Terminal.ask("Email address: ") : nil) else {
            throw ValidationError("Give --email (there is no terminal to ask on).")
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
        let result = try global.daemon.call(.register, params, as: LoginResult.self, progress: "Creating your account at \(provider)…")
        try SignIn.report(result, daemon: global.daemon, verb: "Registered and signed in to")
    }
}
