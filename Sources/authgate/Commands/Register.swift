import ArgumentParser
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
        try AccountRegistration(
            provider: provider,
            username: username,
            email: email,
            passwordStdin: passwordStdin,
            session: session,
            openBrowser: !noBrowser,
            daemon: global.daemon
        ).run()
    }
}
