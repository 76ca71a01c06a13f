import ArgumentParser
import AuthGateTools

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
        if let problem = method.choice.problem(password: username != nil || passwordStdin) { throw ValidationError(problem) }
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

    var choice: SignInChoice {
        SignInChoice(clientCredentials: clientCredentials, device: device, browser: browser, noBrowser: noBrowser)
    }
}
