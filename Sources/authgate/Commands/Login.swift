import ArgumentParser
import AuthGateCore
import AuthGateRPC

struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to a provider.",
        discussion: "The password is asked for without echo, or read from the first line of stdin with --password-stdin.")

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

    @Flag(name: .customLong("client-credentials"), help: "Sign in as the provider's configured client, not as a user (a service's own token).")
    var clientCredentials = false

    func run() throws {
        if clientCredentials {
            let params = LoginParams(provider: provider, grant: .clientCredentials, session: session, scopes: scope.isEmpty ? nil : scope)
            let result = try global.call(.login, params, as: LoginResult.self, progress: "Signing in to \(provider)…")
            return try report(result, global: global, verb: "Signed in to")
        }
        guard let username = username ?? (Terminal.stdinIsTerminal ? Terminal.ask("Username for \(provider): ") : nil) else {
            throw ValidationError("Give --username (there is no terminal to ask on).")
        }
        let password = try readPassword(passwordStdin: passwordStdin, prompt: "Password for \(username) at \(provider): ")
        let params = LoginParams(provider: provider, grant: nil, username: username, password: Secret(password),
                                 session: session, scopes: scope.isEmpty ? nil : scope)
        let result = try global.call(.login, params, as: LoginResult.self, progress: "Signing in to \(provider)…")
        try report(result, global: global, verb: "Signed in to")
    }
}

/// Reads a password from stdin (`--password-stdin`) or asks for it on the terminal without echo.
func readPassword(passwordStdin: Bool, prompt: String) throws -> String {
    if passwordStdin {
        return Terminal.readSecretFromStdin() ?? ""
    }
    guard Terminal.stdinIsTerminal else {
        throw ValidationError("stdin is not a terminal: pipe the password with --password-stdin.")
    }
    return Terminal.askSecret(prompt) ?? ""
}

/// Prints the outcome of a sign-in.
func report(_ result: LoginResult, global: GlobalOptions, verb: String) throws {
    if global.json { return try global.printJSON(result) }
    let who = result.subject.map { " as \($0)" } ?? ""
    let session = result.session == "default" ? "" : " (session \(result.session))"
    print("\(verb) \(result.provider)\(who)\(session). The access token is valid until \(Terminal.describe(result.expiresAt)).")
}
