package import AuthGateCore
import AuthGateRPC
package import FoundationEssentials

/// The session's ID token (OpenID Connect Core §2), as `authgate kubectl` in `id` mode and
/// `authgate token --id-token` hand it out: a Kubernetes API server configured with
/// `--oidc-issuer-url` authenticates ID tokens, by their own `exp`.
package enum SessionIDToken {
    package struct Current {
        package var token: String
        package var expiresAt: Date
        package var claims: [String: JSONValue]
    }

    /// The claims of a compact JWS (its payload, unverified: the daemon verified the ID token
    /// when it arrived, and the API server verifies it again).
    package static func claims(of jwt: String) -> [String: JSONValue]? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = String(parts[1].map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let payload = Data(base64Encoded: base64) else { return nil }
        return (try? JSONValue.parse(payload))?.objectValue
    }

    /// The ID token of a session's token when it stays valid long enough: 60 s, or half its
    /// lifetime when it lives less than two minutes (the rule of docs/DAEMON.md for a minimum
    /// the provider's tokens cannot meet). Otherwise the session is refreshed (`refresh`: a
    /// `token` call with `force_refresh`) and its new ID token taken.
    /// - Parameter refreshed: `token` comes from a refresh the caller forced.
    /// - Parameter accessTokenInstead: How the command asks for the access token instead, for
    ///   the sentences (each command has its own flag).
    /// - Throws: A sentence with `login_required` when the session has no ID token, or the
    ///   refresh brought no new one.
    package static func current(
        in token: SessionToken,
        provider: String,
        session: String?,
        refreshed: Bool,
        accessTokenInstead: String = "use --token-type access",
        now: Date = Date(),
        refresh: () throws -> SessionToken
    ) throws -> Current {
        let signIn = "authgate login \(Terminal.safe(provider))\(session.map { " --session \(Terminal.safe($0))" } ?? "")"
        let noNewToken =
            "The provider \(Terminal.safe(provider)) returned no new ID token when the session was refreshed: sign in again (\(signIn)) for one, or \(accessTokenInstead). [login_required]"
        guard let first = usable(token, now: now) else {
            throw ToolFailure(
                refreshed
                    ? noNewToken
                    : "The session with \(Terminal.safe(provider)) has no ID token: sign in with the openid scope (\(signIn)), or \(accessTokenInstead). [login_required]",
                status: ToolFailure.signInRequired
            )
        }
        if first.fresh { return first.current }
        guard let renewed = usable(try refresh(), now: now), renewed.current.token != first.current.token, renewed.fresh else {
            throw ToolFailure(noNewToken, status: ToolFailure.signInRequired)
        }
        return renewed.current
    }

    /// `nil` when the session has no readable ID token with an `exp`.
    private static func usable(_ session: SessionToken, now: Date) -> (current: Current, fresh: Bool)? {
        guard let token = session.idToken, let claims = claims(of: token),
            case .number(let exp)? = claims["exp"]
        else { return nil }
        let expiresAt = Date(timeIntervalSince1970: exp)
        var required = 60.0
        if case .number(let issuedAt)? = claims["iat"], exp > issuedAt {
            required = MinimumValidity.effective(asked: required, lifetime: exp - issuedAt)
        }
        return (Current(token: token, expiresAt: expiresAt, claims: claims), expiresAt.timeIntervalSince(now) > required)
    }
}
