import ArgumentParser
import AuthGateCore
import AuthGateTools

/// `authgate kubectl PROVIDER`: a kubectl exec credential plugin
/// (client.authentication.k8s.io): prints an `ExecCredential` with the session's ID token (or
/// access token) and its expiry, so kubectl reuses it until then and asks again after.
struct Kubectl: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "kubectl's exec credential plugin: print an ExecCredential with the session's ID or access token.",
        discussion: """
            An API server configured with --oidc-issuer-url and --oidc-client-id authenticates ID tokens: \
            --token-type id (the default when the session has an ID token, as an oidc provider's does; as kubelogin does) \
            sends the session's ID token, with its own exp as the expirationTimestamp, refreshing the session first \
            when it expires within 60 s; --token-type access (the default otherwise: oauth2 providers) sends the access token. \
            `authgate kubectl PROVIDER --setup` signs in if needed and prints the ID token's claims, the \
            `kubectl config set-credentials` command and the API server's flags. When the session needs a \
            sign-in and kubectl lets the plugin use the terminal (interactiveMode), the provider's sign-in \
            runs there; otherwise the plugin exits 3 with one sentence naming `authgate login PROVIDER`.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(
        name: .customLong("token-type"),
        help: ArgumentHelp("id or access (default: id when the session has an ID token, as an oidc provider's does; else access).", valueName: "type")
    )
    var tokenType: KubernetesCredential.TokenType?

    @Option(name: .customLong("scope"), help: ArgumentHelp("A narrower scope than the session's (repeat for several).", valueName: "scope"))
    var scopes: [String] = []

    @Option(help: ArgumentHelp("Exchange the session's access token for one meant for this audience (RFC 8693; access tokens only).", valueName: "audience"))
    var audience: String?

    @Flag(name: .customLong("force-refresh"), help: "Refresh the session's tokens even if they are still valid.")
    var forceRefresh = false

    @Flag(help: "Sign in if needed, print the ID token's claims, the kubectl config command and the API server's flags, and exit.")
    var setup = false

    @Flag(name: .customLong("kubeconfig-snippet"), help: "Print the users: entry to paste into a kubeconfig, and exit.")
    var kubeconfigSnippet = false

    func validate() throws {
        if let problem = KubernetesCredential.Options.problem(tokenType: tokenType, audience: audience) { throw ValidationError(problem) }
    }

    func run() throws {
        if kubeconfigSnippet { return print(snippet()) }
        let options = KubernetesCredential.Options(flags: tokenType, scopes: scopes, audience: audience, forceRefresh: forceRefresh)
        if setup { return try printSetup(options) }
        try Self.printCredential(provider: selection.provider, session: selection.session, socket: global.socket, options: options)
    }

    /// The plugin itself; `authgate kubectl PROVIDER` comes here without the argument parser.
    static func printCredential(
        provider: String,
        session: String?,
        socket: String?,
        options: KubernetesCredential.Options = KubernetesCredential.Options()
    ) throws {
        let credential = try KubernetesCredential.credential(
            provider: provider,
            session: session,
            socket: socket,
            options: options,
            execInfo: KubernetesExecInfo.fromEnvironment()
        )
        print(String(decoding: credential.jsonBytes, as: UTF8.self))
    }

    /// kubelogin's `setup`: sign in if needed, then what to put into kubectl and the API server.
    private func printSetup(_ options: KubernetesCredential.Options) throws {
        print(try KubernetesCredential.setup(provider: selection.provider, session: selection.session, socket: global.socket, options: options))
    }

    private func snippet() -> String {
        KubernetesCredential.snippet(provider: selection.provider, session: selection.session)
    }
}

extension KubernetesCredential.TokenType: ExpressibleByArgument {}
