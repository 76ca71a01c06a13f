import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to a provider.",
        discussion: """
            The password is asked for without echo on a terminal, or read from the first line of stdin (a pipe; \
            --password-stdin says so explicitly). A provider whose only grant is client_credentials (a service's) \
            is signed in to as its client, with no user name; the daemon also does that by itself on first use.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The provider's id (see `authgate providers`).")
    var provider: String

    @Option(help: "Your user name at the provider (asked for when absent).")
    var username: String?

    @Flag(name: .customLong("password-stdin"), help: "Read the password from stdin instead of asking.")
    var passwordStdin = false

    @Option(help: "Name of the session, to keep several sign-ins at one provider.")
    var session: String?

    @Option(help: ArgumentHelp("Scopes to ask for (repeatable).", valueName: "scope"))
    var scope: [String] = []

    @OptionGroup var method: SignInMethodOptions

    @Flag(name: .customLong("no-qr"), help: "Do not draw a QR code of the device sign-in page.")
    var noQR = false

    @Flag(
        inversion: .prefixedNo,
        help:
            "Ask you before a program gets this session's tokens for the first time (consent; `authgate consent` lists your answers). --no-confirm ends that choice."
    )
    var confirm: Bool?

    func validate() throws {
        if method.chosen + (username != nil || passwordStdin ? 1 : 0) > 1 {
            throw ValidationError("Choose one way to sign in: --device, --browser, --client-credentials, or --username/--password-stdin.")
        }
    }

    func run() throws {
        try SignIn(
            provider: provider,
            session: session,
            username: username,
            passwordStdin: passwordStdin,
            scopes: scope,
            method: method.choice,
            showQRCode: !noQR,
            confirm: confirm,
            daemon: global.daemon
        ).run()
    }
}

/// A sign-in with typed values: `authgate login`'s, and the point-of-use sign-in of the
/// credential helpers and `kubectl --setup` (``PointOfUseSignIn``), which need no argv.
struct SignIn {
    var provider: String
    var session: String?
    var username: String? = nil
    var passwordStdin = false
    var scopes: [String] = []
    var method = SignInChoice()
    var showQRCode = true
    /// `--confirm` / `--no-confirm`; `nil` leaves the session's choice as it is.
    var confirm: Bool? = nil
    var daemon: DaemonClient

    /// Whether a user name or password was given: the password grant.
    private var userNamed: Bool { username != nil || passwordStdin }

    func run() throws {
        let grant = try method.grant(for: provider, userNamed: userNamed, daemon: daemon)
        if let grant, grant.isInteractive {
            return try InteractiveLogin(
                daemon: daemon,
                provider: provider,
                grant: grant,
                session: session,
                scopes: scopes,
                prompt: nil,
                openBrowser: !method.noBrowser,
                showQRCode: showQRCode,
                verb: "Signed in to",
                confirm: confirm
            ).run()
        }
        if let grant, grant.isService {
            let params = LoginParams(provider: provider, grant: grant, session: session, scopes: scopes.isEmpty ? nil : scopes, confirm: confirm)
            let result = try daemon.call(.login, params, as: LoginResult.self, progress: "Signing in to \(provider)…")
            return try report(result, daemon: daemon, verb: "Signed in to")
        }
        guard let username = username ?? (Terminal.stdinIsTerminal ? Terminal.ask("Username for \(provider): ") : nil) else {
            throw ValidationError("Give --username (there is no terminal to ask on).")
        }
        let password = try readPassword(passwordStdin: passwordStdin, prompt: "Password for \(username) at \(provider): ")
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
        try report(result, daemon: daemon, verb: "Signed in to")
    }
}

/// The ways to sign in that `authgate login` and `authgate provider test` both take.
struct SignInMethodOptions: ParsableArguments {
    @Flag(
        name: .customLong("client-credentials"),
        help: "Sign in as the provider's configured client, not as a user (a service's own token: client credentials, or its platform token's grant)."
    )
    var clientCredentials = false

    @Flag(help: "Sign in with a code typed on another device (device authorization grant).")
    var device = false

    @Flag(help: "Sign in in a web browser (authorization code with PKCE).")
    var browser = false

    @Flag(name: .customLong("no-browser"), help: "Do not try to open the browser; just print the URL.")
    var noBrowser = false

    /// How many of `--device`, `--browser` and `--client-credentials` were given.
    var chosen: Int { [device, browser, clientCredentials].filter { $0 }.count }

    var choice: SignInChoice {
        SignInChoice(clientCredentials: clientCredentials, device: device, browser: browser, noBrowser: noBrowser)
    }
}

extension SignInChoice {
    /// The grant to sign in to `provider` with (``grant(userNamed:offered:at:)``), asking the
    /// daemon what the provider offers only when that decides.
    func grant(for provider: String, userNamed: Bool, daemon: DaemonClient) throws -> Grant? {
        var offered: [Grant] = []
        if needsOffer(userNamed: userNamed) {
            let providers = try daemon.call(.providersList, EmptyResult(), as: [ProviderInfo].self)
            offered = providers.first(where: { $0.id == provider })?.grants ?? []
        }
        return grant(userNamed: userNamed, offered: offered, at: .current(environment: ProcessInfo.processInfo.environment))
    }
}

/// Reads a password: asks for it on the terminal without echo, or takes the first line of stdin
/// when it is not a terminal (a pipe, with or without `--password-stdin`, as the README says).
func readPassword(passwordStdin: Bool, prompt: String) throws -> String {
    if passwordStdin || !Terminal.stdinIsTerminal {
        return Terminal.readSecretFromStdin() ?? ""
    }
    return Terminal.askSecret(prompt) ?? ""
}

/// Prints the outcome of a sign-in.
func report(_ result: LoginResult, daemon: DaemonClient, verb: String) throws {
    if daemon.json { return try daemon.printJSON(result) }
    // The name the user knows; the subject is often opaque ("1", a UUID).
    let who = (result.displayName ?? result.subject).map { " as \(Terminal.safe($0))" } ?? ""
    let session = result.session == "default" ? "" : " (session \(result.session))"
    print("\(verb) \(result.provider)\(who)\(session). The access token is \(Terminal.validity(result.expiresAt)).")
    if let notice = result.notice { Terminal.writeError("authgate: warning: \(Terminal.safe(notice))\n") }
}
