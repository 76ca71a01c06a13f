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

        package var isPlain: Bool { scopes.isEmpty && audience == nil && !forceRefresh }
    }

    /// The `token` (or, with an audience, `token.exchange`) result.
    package static func fetch(provider: String, session: String?, socket: String?, options: Options, force: Bool) throws -> JSONValue {
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

    /// The `ExecCredential` for the session, as kubectl asks for it (`execInfo`:
    /// `KUBERNETES_EXEC_INFO`, its apiVersion and whether the plugin may use the terminal).
    /// When the session needs a sign-in and kubectl lets the plugin ask, `signIn` runs the
    /// provider's sign-in on the terminal (false: there is none); otherwise, or without a
    /// terminal, one sentence naming `authgate login PROVIDER` (status 3).
    package static func credential(
        provider: String,
        session: String?,
        socket: String?,
        options: Options = Options(),
        execInfo: KubernetesExecInfo?,
        signIn: (_ provider: String, _ session: String?) throws -> Bool
    ) throws -> JSONValue {
        let apiVersion = execInfo?.apiVersion.flatMap { apiVersions.contains($0) ? $0 : nil } ?? apiVersions[0]
        let fetch = { (force: Bool) throws -> JSONValue in
            try Self.fetch(provider: provider, session: session, socket: socket, options: options, force: force)
        }
        let result = try fetchSigningIn(provider: provider, session: session, socket: socket, options: options) {
            guard execInfo?.interactive == true else {
                throw ToolFailure(
                    CredentialHosts.signInSentence(provider: provider, session: session, why: "kubectl does not let the plugin ask"),
                    status: ToolFailure.signInRequired
                )
            }
            guard try signIn(provider, session) else {
                throw ToolFailure(
                    CredentialHosts.signInSentence(provider: provider, session: session, why: "there is no terminal to run it on"),
                    status: ToolFailure.signInRequired
                )
            }
        }
        // The default, without a second call: `id` when the session has an ID token (an `oidc`
        // provider's, signed in with openid, as kubelogin sends), else `access` (`oauth2`). A
        // forced refresh may have lost the ID token: then the provider's type says.
        let hasIDToken = result.objectValue?["id_token"]?.stringValue != nil
        let tokenType = try options.tokenType ?? (hasIDToken ? .id : options.forceRefresh ? providerTokenType(provider, socket: socket) : .access)
        if tokenType == .id {
            let id = try SessionIDToken.current(in: result, provider: provider, session: session, refreshed: options.forceRefresh) { try fetch(true) }
            return execCredential(apiVersion: apiVersion, token: id.token, expiresAt: id.expiresAt)
        }
        let access = try PlainCall.token(result)
        return execCredential(apiVersion: apiVersion, token: access.token, expiresAt: access.expiresAt)
    }

    /// ``fetch(provider:session:socket:options:force:)`` (forced as `options` say); when the
    /// session needs a sign-in, `signIn` runs it (or throws why it cannot), and the result is
    /// fetched again. The plugin's credential and `--setup` both start here.
    package static func fetchSigningIn(
        provider: String,
        session: String?,
        socket: String?,
        options: Options,
        signIn: () throws -> Void
    ) throws -> JSONValue {
        do {
            return try fetch(provider: provider, session: session, socket: socket, options: options, force: options.forceRefresh)
        } catch let failure as ToolFailure where failure.status == ToolFailure.signInRequired {
            try signIn()
            return try fetch(provider: provider, session: session, socket: socket, options: options, force: false)
        }
    }

    /// `id` for an `oidc` provider, `access` for any other.
    package static func providerTokenType(_ provider: String, socket: String?) throws -> TokenType {
        guard case .array(let providers) = try PlainCall.result(.providersList, socket: socket) else { return .access }
        let type = providers.compactMap(\.objectValue).first { $0["id"]?.stringValue == provider }?["type"]?.stringValue
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
