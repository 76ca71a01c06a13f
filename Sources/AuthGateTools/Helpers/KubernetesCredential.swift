package import AuthGateCore
import AuthGateRPC
package import FoundationEssentials

/// kubectl's exec credential plugin (client.authentication.k8s.io), `authgate kubectl`: the
/// session's token as an `ExecCredential`, and what `--setup` and `--kubeconfig-snippet` print.
package enum KubernetesCredential {
    package static let apiVersions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]

    package enum TokenType: String, CaseIterable, Sendable {
        case id, access
    }

    /// What a credential is made of, besides the session.
    package struct Options {
        package var tokenType: TokenType?
        package var scopes: [String] = []
        package var audience: String?
        package var forceRefresh = false

        package init(tokenType: TokenType? = nil, scopes: [String] = [], audience: String? = nil, forceRefresh: Bool = false) {
            self.tokenType = tokenType
            self.scopes = scopes
            self.audience = audience
            self.forceRefresh = forceRefresh
        }

        /// `authgate kubectl`'s flags: `--audience` exchanges the access token, so it sends
        /// one whatever `--token-type` says (which ``problem(tokenType:audience:)`` refuses).
        package init(flags tokenType: TokenType?, scopes: [String], audience: String?, forceRefresh: Bool) {
            self.init(tokenType: audience != nil ? .access : tokenType, scopes: scopes, audience: audience, forceRefresh: forceRefresh)
        }

        /// The usage error of `--audience` with `--token-type id`; `nil` for any other pair.
        package static func problem(tokenType: TokenType?, audience: String?) -> String? {
            audience != nil && tokenType == .id ? "--audience exchanges the access token: it goes with --token-type access." : nil
        }

        package var isPlain: Bool { scopes.isEmpty && audience == nil && !forceRefresh }
    }

    /// The `token` (or, with an audience, `token.exchange`) result: for the plain plugin (no
    /// scope, audience or refresh), kubectl's call before each of its requests, a plain call.
    private static func fetch(provider: String, session: String?, socket: String?, options: Options, force: Bool) throws(ToolFailure) -> SessionToken {
        let daemon = DaemonConnection(socket: socket)
        if !force, options.isPlain {
            var params: [String: JSONValue] = ["min_valid_seconds": .number(60), "provider": .string(provider)]
            if let session { params["session"] = .string(session) }
            return try SessionToken(plain: daemon.plainResult(.token, params: params))
        }
        let scopes = options.scopes.isEmpty ? nil : options.scopes
        if let audience = options.audience {
            let params = TokenExchangeParams(
                provider: provider,
                session: session,
                audience: audience,
                scopes: scopes,
                minValidSeconds: 60,
                forceRefresh: force ? true : nil
            )
            return SessionToken(try daemon.call(.tokenExchange, params, as: TokenResult.self))
        }
        let params = TokenParams(provider: provider, session: session, minValidSeconds: 60, forceRefresh: force ? true : nil, scopes: scopes)
        return SessionToken(try daemon.call(.token, params, as: TokenResult.self))
    }

    /// The `ExecCredential` for the session, as kubectl asks for it (`execInfo`:
    /// `KUBERNETES_EXEC_INFO`, its apiVersion and whether the plugin may use the terminal).
    /// When the session needs a sign-in and kubectl lets the plugin ask, the provider's sign-in
    /// runs on the terminal (``PointOfUseSignIn``); otherwise, or without a terminal, one
    /// sentence naming `authgate login PROVIDER` (status 3).
    package static func credential(
        provider: String,
        session: String?,
        socket: String?,
        options: Options = Options(),
        execInfo: KubernetesExecInfo?
    ) throws -> JSONValue {
        let apiVersion = execInfo?.apiVersion.flatMap { apiVersions.contains($0) ? $0 : nil } ?? apiVersions[0]
        let token = try fetchSigningIn(provider: provider, session: session, socket: socket, options: options) {
            guard execInfo?.interactive == true else {
                throw ToolFailure(
                    CredentialHosts.signInSentence(provider: provider, session: session, why: "kubectl does not let the plugin ask"),
                    status: ToolFailure.signInRequired
                )
            }
            guard try PointOfUseSignIn(socket: socket, tool: "kubectl").run(provider: provider, session: session) else {
                throw ToolFailure(
                    CredentialHosts.signInSentence(provider: provider, session: session, why: "there is no terminal to run it on"),
                    status: ToolFailure.signInRequired
                )
            }
        }
        // The default, without a second call: `id` when the session has an ID token (an `oidc`
        // provider's, signed in with openid, as kubelogin sends), else `access` (`oauth2`). A
        // forced refresh may have lost the ID token: then the provider's type says.
        let tokenType = try options.tokenType ?? (token.idToken != nil ? .id : options.forceRefresh ? providerTokenType(provider, socket: socket) : .access)
        if tokenType == .id {
            let id = try SessionIDToken.current(in: token, provider: provider, session: session, refreshed: options.forceRefresh) {
                try fetch(provider: provider, session: session, socket: socket, options: options, force: true)
            }
            return execCredential(apiVersion: apiVersion, token: id.token, expiresAt: id.expiresAt)
        }
        return execCredential(apiVersion: apiVersion, token: token.token, expiresAt: token.expiresAt)
    }

    /// ``fetch(provider:session:socket:options:force:)`` (forced as `options` say); when the
    /// session needs a sign-in, `signIn` runs it (or throws why it cannot), and the result is
    /// fetched again. The plugin's credential and `--setup` both start here.
    private static func fetchSigningIn(
        provider: String,
        session: String?,
        socket: String?,
        options: Options,
        signIn: () throws -> Void
    ) throws -> SessionToken {
        do throws(ToolFailure) {
            return try fetch(provider: provider, session: session, socket: socket, options: options, force: options.forceRefresh)
        } catch let failure where failure.reason == .loginRequired {
            try signIn()
            return try fetch(provider: provider, session: session, socket: socket, options: options, force: false)
        }
    }

    /// kubelogin's `setup` (`authgate kubectl PROVIDER --setup`): signs in on the terminal if
    /// the session needs it (as `authgate login` would), then ``setupText(provider:session:accessToken:claims:)``
    /// for the session's ID token.
    package static func setup(provider: String, session: String?, socket: String?, options: Options) throws -> String {
        let token = try fetchSigningIn(provider: provider, session: session, socket: socket, options: options) {
            try SignIn(provider: provider, session: session, daemon: DaemonConnection(socket: socket)).run()
        }
        let id = try SessionIDToken.current(in: token, provider: provider, session: session, refreshed: options.forceRefresh) {
            try fetch(provider: provider, session: session, socket: socket, options: options, force: true)
        }
        return setupText(provider: provider, session: session, accessToken: options.tokenType == .access, claims: id.claims)
    }

    /// `id` for an `oidc` provider, `access` for any other.
    package static func providerTokenType(_ provider: String, socket: String?) throws(ToolFailure) -> TokenType {
        let type = try DaemonConnection(socket: socket).providers().first { $0.id == provider }?.type
        return type == "oidc" ? .id : .access
    }

    /// The `ExecCredential` kubectl reads: `token` until `expiresAt`. Written with Core's plain
    /// writer: the coders' first use would be most of the plugin's cost.
    package static func execCredential(apiVersion: String, token: String, expiresAt: Date) -> JSONValue {
        .object([
            "apiVersion": .string(apiVersion), "kind": .string("ExecCredential"),
            "status": .object(["expirationTimestamp": .string(UTCTimestamp.format(expiresAt)), "token": .string(token)]),
        ])
    }

    /// kubelogin's `setup`: the ID token's claims, the `kubectl config set-credentials`
    /// command and the API server's flags.
    /// - Parameter accessToken: The plugin sends the access token (`--token-type access`).
    package static func setupText(provider: String, session: String?, accessToken: Bool, claims: [String: JSONValue]) -> String {
        let lines = claims.sorted { $0.key < $1.key }.map { key, value in
            let text = value.stringValue ?? (try? RPCCoding.makeEncoder().encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
            return "  \(Terminal.safe(key)): \(Terminal.safe(text))"
        }
        let issuer = claims["iss"]?.stringValue ?? "ISSUER"
        let clientID: String =
            switch claims["aud"] {
            case .string(let audience)?: audience
            case .array(let audiences)?: claims["azp"]?.stringValue ?? audiences.first?.stringValue ?? "CLIENT_ID"
            default: "CLIENT_ID"
            }
        let name = "oidc-" + provider + (session.map { "-\($0)" } ?? "")
        let args = ["kubectl", provider] + (session.map { ["--session", $0] } ?? []) + (accessToken ? ["--token-type", "access"] : [])
        return
            """
            The ID token's claims:
            \(lines.joined(separator: "\n"))

            Point kubectl at authgate (then use the user \(name) in a context):

              kubectl config set-credentials \(name) --exec-api-version=\(apiVersions[0]) --exec-command=authgate \
            \(args.map { "--exec-arg=\(shellQuoted($0))" }.joined(separator: " ")) --exec-interactive-mode=IfAvailable

            Give the API server (kube-apiserver) these flags:

              --oidc-issuer-url=\(Terminal.safe(issuer))
              --oidc-client-id=\(Terminal.safe(clientID))
              --oidc-username-claim=sub

            and bind the user it names, "\(Terminal.safe(issuer))#\(Terminal.safe(claims["sub"]?.stringValue ?? "SUB"))", to a role.
            """
    }

    /// `text` as one shell word.
    package static func shellQuoted(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_./:=@".unicodeScalars.contains($0)
        }
        return plain && !text.isEmpty ? text : "'" + Terminal.safe(text).replacing("'", with: #"'\''"#) + "'"
    }

    /// The `users:` entry of a kubeconfig.
    package static func snippet(provider: String, session: String?) -> String {
        let name = provider + (session.map { "-\($0)" } ?? "")
        let args = ["kubectl", provider] + (session.map { ["--session", $0] } ?? [])
        return """
            users:
            - name: \(name)
              user:
                exec:
                  apiVersion: \(apiVersions[0])
                  command: authgate
                  args: [\(args.map { "\"\($0)\"" }.joined(separator: ", "))]
                  interactiveMode: IfAvailable
                  provideClusterInfo: false
            """
    }
}
