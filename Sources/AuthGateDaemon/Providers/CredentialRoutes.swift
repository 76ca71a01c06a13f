import AuthGateCore

/// Which provider answers git's or docker's `credential.get` for a host, as far as the cached
/// path may decide it without the dispatcher (``CachedTokenAnswers``): published with the
/// providers (``OpenProviders``), so it changes, with their generation, when they do.
///
/// The dispatcher (`TokenMethods.credentialGet`) takes the first provider, by id, that the
/// caller may see and that lists the host for the tool. A route is kept only where that choice
/// is the same for every caller: exactly one provider lists the host for the tool, and anyone
/// may use it (it is open, as ``OpenProviders`` counts it). A host two providers list (one of
/// them possibly hidden from some callers by access rules) or one of a provider with access
/// rules, or unusable, has no route, and the dispatcher decides. So has a host of a provider
/// that names `paths`: which provider answers then depends on the path git sends
/// (``CredentialHost/select(host:path:tool:among:)``), and the plain line carries none.
enum CredentialRoutes {
    /// A tool and a host, normalized (``key(host:tool:)``).
    struct Key: Hashable, Sendable {
        var tool: String
        var host: String
    }

    /// What the answer names besides the token.
    struct Route: Equatable, Sendable {
        var provider: String
        var username: String
        /// `bearer` when the provider asks git for `Authorization: Bearer`; `nil`: `basic`.
        var authtype: String? = nil

        /// The `credential.get` result with `token`, an encoded `TokenResult`: `CredentialResult`
        /// as the dispatcher encodes it (sorted keys; no `session`, the default one answers).
        func result(token: [UInt8]) -> [UInt8] {
            var bytes = Array("{".utf8)
            if let authtype { bytes += #""authtype":\#(JSONValue.quoted(authtype)),"#.utf8 }
            bytes += #""provider":\#(JSONValue.quoted(provider)),"token":"#.utf8
            bytes += token
            bytes += #","username":\#(JSONValue.quoted(username))}"#.utf8
            return bytes
        }
    }

    /// What one provider offers the helpers.
    struct Claim {
        var provider: String
        var helper: ProviderConfiguration.CredentialHelper
        /// Whether the cached path may answer for it (``OpenProviders``).
        var open: Bool
    }

    /// The routes the claims make: a key that exactly one provider claims, when it is open.
    static func routes(_ claims: some Sequence<Claim>) -> [Key: Route] {
        var claimants: [Key: [Claim]] = [:]
        for claim in claims {
            let keys = Set(claim.helper.tools.flatMap { tool in claim.helper.hosts.compactMap { key(host: $0, tool: tool) } })
            for key in keys { claimants[key, default: []].append(claim) }
        }
        return claimants.compactMapValues { claims in
            guard claims.count == 1, let claim = claims.first, claim.open, claim.helper.paths.isEmpty else { return nil }
            return Route(
                provider: claim.provider,
                username: claim.helper.username,
                authtype: claim.helper.authType == .basic ? nil : claim.helper.authType.rawValue
            )
        }
    }

    /// `host` as ``CredentialHost/normalize(_:)`` reads it, without the scheme's default port
    /// (`example.com:443` is `example.com`, as ``CredentialHost/sameHost(_:_:)`` has it);
    /// `nil` when it is not a host.
    static func key(host: String, tool: String) -> Key? {
        guard let normalized = CredentialHost.normalize(host) else { return nil }
        return Key(tool: tool, host: normalized.hasSuffix(":443") ? String(normalized.dropLast(4)) : normalized)
    }
}
