import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

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

    static let apiVersions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(
        name: .customLong("token-type"),
        help: ArgumentHelp("id or access (default: id when the session has an ID token, as an oidc provider's does; else access).", valueName: "type")
    )
    var tokenType: TokenType?

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

    enum TokenType: String, ExpressibleByArgument, CaseIterable {
        case id, access
    }

    /// What a credential is made of, besides the session.
    struct Options {
        var tokenType: TokenType?
        var scopes: [String] = []
        var audience: String?
        var forceRefresh = false

        var isPlain: Bool { scopes.isEmpty && audience == nil && !forceRefresh }
    }

    func validate() throws {
        if audience != nil, tokenType == .id {
            throw ValidationError("--audience exchanges the access token: it goes with --token-type access.")
        }
    }

    func run() throws {
        if kubeconfigSnippet { return print(snippet()) }
        let options = Options(tokenType: audience != nil ? .access : tokenType, scopes: scopes, audience: audience, forceRefresh: forceRefresh)
        if setup { return try printSetup(options) }
        try Self.printCredential(provider: selection.provider, session: selection.session, socket: global.socket, options: options)
    }

    /// The plugin itself; `authgate kubectl PROVIDER` comes here without the argument parser.
    static func printCredential(provider: String, session: String?, socket: String?, options: Options = Options()) throws {
        let info = ProcessEnvironment.value("KUBERNETES_EXEC_INFO")
            .flatMap { KubernetesExecInfo.parse(Array($0.utf8)) }
        let apiVersion = info?.apiVersion.flatMap { Self.apiVersions.contains($0) ? $0 : nil } ?? Self.apiVersions[0]
        let fetch = { (force: Bool) throws -> JSONValue in try Self.fetch(provider: provider, session: session, socket: socket, options: options, force: force)
        }
        var result: JSONValue
        do {
            result = try fetch(options.forceRefresh)
        } catch let failure as ToolFailure where failure.status == ToolFailure.signInRequired {
            guard info?.interactive == true else {
                throw CLIError(
                    message: CredentialHosts.signInSentence(provider: provider, session: session, why: "kubectl does not let the plugin ask"),
                    exitCode: ExitStatus.signInRequired
                )
            }
            guard try PointOfUseSignIn.run(provider: provider, session: session, socket: socket, tool: "kubectl") else {
                throw CLIError(
                    message: CredentialHosts.signInSentence(provider: provider, session: session, why: "there is no terminal to run it on"),
                    exitCode: ExitStatus.signInRequired
                )
            }
            result = try fetch(false)
        }
        let token: String
        let expiresAt: Date
        // The default, without a second call: `id` when the session has an ID token (an `oidc`
        // provider's, signed in with openid, as kubelogin sends), else `access` (`oauth2`). A
        // forced refresh may have lost the ID token: then the provider's type says.
        let hasIDToken = result.objectValue?["id_token"]?.stringValue != nil
        let tokenType = try options.tokenType ?? (hasIDToken ? .id : options.forceRefresh ? providerTokenType(provider, socket: socket) : .access)
        if tokenType == .id {
            let id = try SessionIDToken.current(in: result, provider: provider, session: session, refreshed: options.forceRefresh) { try fetch(true) }
            (token, expiresAt) = (id.token, id.expiresAt)
        } else {
            let access = try PlainCall.token(result)
            (token, expiresAt) = (access.token, access.expiresAt)
        }
        // Written with Core's plain writer, like the request: the coders' first use would be
        // most of the cost.
        let credential = JSONValue.object([
            "apiVersion": .string(apiVersion), "kind": .string("ExecCredential"),
            "status": .object(["expirationTimestamp": .string(UTCTimestamp.format(expiresAt)), "token": .string(token)]),
        ])
        print(String(decoding: credential.jsonBytes, as: UTF8.self))
    }

    /// The `token` (or, with an audience, `token.exchange`) result.
    private static func fetch(provider: String, session: String?, socket: String?, options: Options, force: Bool) throws -> JSONValue {
        if !force, options.isPlain {
            var params: [String: JSONValue] = ["min_valid_seconds": .number(60), "provider": .string(provider)]
            if let session { params["session"] = .string(session) }
            return try PlainCall.result(.token, params: params, socket: socket)
        }
        let scopes = options.scopes.isEmpty ? nil : options.scopes
        if let audience = options.audience {
            return try PlainCall.result(
                .tokenExchange,
                TokenExchangeParams(
                    provider: provider,
                    session: session,
                    audience: audience,
                    scopes: scopes,
                    minValidSeconds: 60,
                    forceRefresh: force ? true : nil
                ),
                socket: socket
            )
        }
        return try PlainCall.result(
            .token,
            TokenParams(
                provider: provider,
                session: session,
                minValidSeconds: 60,
                forceRefresh: force ? true : nil,
                scopes: scopes
            ),
            socket: socket
        )
    }

    /// `id` for an `oidc` provider, `access` for any other.
    private static func providerTokenType(_ provider: String, socket: String?) throws -> TokenType {
        guard case .array(let providers) = try PlainCall.result(.providersList, socket: socket) else { return .access }
        let type = providers.compactMap(\.objectValue).first { $0["id"]?.stringValue == provider }?["type"]?.stringValue
        return type == "oidc" ? .id : .access
    }

    /// kubelogin's `setup`: sign in if needed, then what to put into kubectl and the API server.
    private func printSetup(_ options: Options) throws {
        let provider = selection.provider
        let session = selection.session
        let socket = global.socket
        let fetch = { (force: Bool) throws -> JSONValue in try Self.fetch(provider: provider, session: session, socket: socket, options: options, force: force)
        }
        var result: JSONValue
        do {
            result = try fetch(options.forceRefresh)
        } catch let failure as ToolFailure where failure.status == ToolFailure.signInRequired {
            var arguments = [provider]
            if let session { arguments += ["--session", session] }
            if let socket { arguments += ["--socket", socket] }
            try Login.parse(arguments).run()
            result = try fetch(false)
        }
        let id = try SessionIDToken.current(in: result, provider: provider, session: session, refreshed: options.forceRefresh) { try fetch(true) }
        let claims = id.claims.sorted { $0.key < $1.key }.map { key, value in
            let text = value.stringValue ?? (try? RPCCoding.makeEncoder().encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
            return "  \(Terminal.safe(key)): \(Terminal.safe(text))"
        }
        let issuer = id.claims["iss"]?.stringValue ?? "ISSUER"
        let clientID: String =
            switch id.claims["aud"] {
            case .string(let audience)?: audience
            case .array(let audiences)?: id.claims["azp"]?.stringValue ?? audiences.first?.stringValue ?? "CLIENT_ID"
            default: "CLIENT_ID"
            }
        let name = "oidc-" + provider + (session.map { "-\($0)" } ?? "")
        let args = ["kubectl", provider] + (session.map { ["--session", $0] } ?? []) + (options.tokenType == .access ? ["--token-type", "access"] : [])
        print(
            """
            The ID token's claims:
            \(claims.joined(separator: "\n"))

            Point kubectl at authgate (then use the user \(name) in a context):

              kubectl config set-credentials \(name) --exec-api-version=\(Self.apiVersions[0]) --exec-command=authgate \
            \(args.map { "--exec-arg=\(Self.shellQuoted($0))" }.joined(separator: " ")) --exec-interactive-mode=IfAvailable

            Give the API server (kube-apiserver) these flags:

              --oidc-issuer-url=\(Terminal.safe(issuer))
              --oidc-client-id=\(Terminal.safe(clientID))
              --oidc-username-claim=sub

            and bind the user it names, "\(Terminal.safe(issuer))#\(Terminal.safe(id.claims["sub"]?.stringValue ?? "SUB"))", to a role.
            """
        )
    }

    /// `text` as one shell word.
    static func shellQuoted(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_./:=@".unicodeScalars.contains($0)
        }
        return plain && !text.isEmpty ? text : "'" + Terminal.safe(text).replacing("'", with: #"'\''"#) + "'"
    }

    private func snippet() -> String {
        let name = selection.provider + (selection.session.map { "-\($0)" } ?? "")
        let args = ["kubectl", selection.provider] + (selection.session.map { ["--session", $0] } ?? [])
        return """
            users:
            - name: \(name)
              user:
                exec:
                  apiVersion: \(Self.apiVersions[0])
                  command: authgate
                  args: [\(args.map { "\"\($0)\"" }.joined(separator: ", "))]
                  interactiveMode: IfAvailable
                  provideClusterInfo: false
            """
    }
}
