public import AuthGateCore
public import AuthGateRPC

/// What `authgate provider test` reports (its `--json`, docs/PROVIDERS.md): one check per thing
/// a provider's administrator needs to know, each passed, a warning, failed or not applicable
/// with the reason, made from the sign-in's result, `session.inspect` and the sign-out's
/// revocation. A check fails only when something a user needs does not work; a property the
/// daemon handles (a short lifetime, no refresh token, a claim or scope not given) is a warning
/// that says what it means.
public struct ProviderTestReport: Sendable, Codable, Equatable {
    public struct Check: Sendable, Codable, Equatable {
        public enum Outcome: String, Sendable, Codable {
            case pass
            /// Works, but not as the file or the administrator may expect: the detail says what it
            /// means for the users. Not a failure.
            case warn
            case fail
            /// Not applicable here, the reason says why.
            case skip
        }

        /// Stable: `sign_in`, `id_token`, `claims`, `scopes`, `access_token_lifetime`,
        /// `refresh_token`, `refresh`, `userinfo`, `revocation`, `dpop`.
        public var name: String
        public var outcome: Outcome
        /// One sentence: what was seen, or why it failed or does not apply.
        public var detail: String

        public init(_ name: String, _ outcome: Outcome, _ detail: String) {
            self.name = name
            self.outcome = outcome
            self.detail = detail
        }
    }

    public var provider: String
    public var session: String
    public var grant: Grant
    /// No check failed (warnings do not count).
    public var passed: Bool
    /// The session was kept (`--keep`), not signed out.
    public var kept: Bool
    public var checks: [Check]

    /// The claims an administrator wants a sign-in to carry (OpenID Connect Core §5.1).
    public static let wantedClaims = ["sub", "name", "email", "preferred_username"]
    /// The minimum validity git's and docker's credential helpers ask (`min_valid_seconds`): an
    /// access token living no longer cannot meet it, and the daemon serves those calls a token
    /// younger than half its lifetime instead (docs/DAEMON.md).
    public static let helpersMinimumValidity = 60

    /// - Parameter signOut: The sign-out's result; `nil` when the session was kept.
    public init(signIn: LoginResult, inspection: SessionInspection, signOut: LogoutResult?) {
        provider = inspection.provider
        session = inspection.session
        grant = inspection.grant
        kept = signOut == nil
        let who = (signIn.displayName ?? signIn.subject).map { " as \($0)" } ?? ""
        checks = [Check("sign_in", .pass, "signed in with the \(inspection.grant.rawValue) grant\(who)")]
        checks.append(Self.idToken(inspection))
        checks.append(Self.claims(inspection))
        checks.append(Self.scopes(inspection))
        checks.append(Self.lifetime(inspection))
        checks += Self.refresh(inspection)
        checks.append(Self.userinfo(inspection))
        checks.append(Self.revocation(signOut))
        checks.append(Self.dpop(inspection))
        passed = !checks.contains { $0.outcome == .fail }
    }

    private static func idToken(_ inspection: SessionInspection) -> Check {
        if let token = inspection.idToken {
            return Check(
                "id_token",
                .pass,
                "verified: alg \(token.alg), kid \(token.kid ?? "(none)"), iss \(token.iss), aud \(token.aud.joined(separator: " "))"
            )
        }
        if inspection.idTokenExpected {
            return Check("id_token", .fail, "none came, though the scope openid was asked of an OpenID Connect provider")
        }
        return Check("id_token", .skip, "not an OpenID Connect sign-in (an oauth2 provider, client credentials, or no openid scope)")
    }

    private static func claims(_ inspection: SessionInspection) -> Check {
        let fromToken = Set(inspection.idToken?.claims ?? [])
        let fromUserinfo = Set(inspection.userinfo?.claims ?? [])
        guard inspection.idToken != nil || inspection.userinfo?.status == .answered else {
            return Check("claims", .skip, "no ID token or userinfo answer to read claims from")
        }
        let sources = [inspection.idToken != nil ? "ID token" : nil, inspection.userinfo?.status == .answered ? "userinfo" : nil]
            .compactMap { $0 }.joined(separator: " and ")
        let present = fromToken.union(fromUserinfo)
        let missing = wantedClaims.filter { !present.contains($0) }
        guard missing.isEmpty else {
            return Check(
                "claims",
                .warn,
                "missing from the \(sources): \(missing.joined(separator: ", ")) (ask the scopes profile and email?); the daemon works without them, programs that read them find none"
            )
        }
        return Check("claims", .pass, "\(wantedClaims.joined(separator: ", ")) present (\(sources))")
    }

    private static func scopes(_ inspection: SessionInspection) -> Check {
        let granted = Set(inspection.scopesGranted)
        let missing = inspection.scopesRequested.filter { !granted.contains($0) }
        let asked = inspection.scopesRequested.isEmpty ? "(none)" : inspection.scopesRequested.joined(separator: " ")
        guard missing.isEmpty else {
            // RFC 6749 §3.3: a provider may grant fewer scopes (or name them otherwise, as Google
            // does); the daemon serves the tokens it got.
            return Check(
                "scopes",
                .warn,
                "asked \(asked), granted \(inspection.scopesGranted.joined(separator: " ")): not granted \(missing.joined(separator: " ")); an API that needs them will refuse the tokens"
            )
        }
        let extra = inspection.scopesGranted.filter { !inspection.scopesRequested.contains($0) }
        return Check("scopes", .pass, "granted as asked: \(asked)\(extra.isEmpty ? "" : " (and \(extra.joined(separator: " ")))")")
    }

    private static func lifetime(_ inspection: SessionInspection) -> Check {
        guard let seconds = inspection.accessTokenLifetimeSeconds else {
            return Check("access_token_lifetime", .pass, "never expires (the provider sends no expires_in; the file's expires_in_default is never)")
        }
        guard seconds > helpersMinimumValidity else {
            return Check(
                "access_token_lifetime",
                .warn,
                "\(seconds) s: short; the daemon refreshes it ahead of its expiry, and serves callers asking \(helpersMinimumValidity) s or more of validity (git's and docker's helpers) a token younger than half its lifetime (docs/DAEMON.md)"
            )
        }
        return Check("access_token_lifetime", .pass, "\(seconds) s")
    }

    private static func refresh(_ inspection: SessionInspection) -> [Check] {
        if inspection.grant.isService {
            let again: Check
            switch inspection.refresh?.status {
            case .refreshed?: again = Check("refresh", .pass, "a forced refresh obtained new tokens with the \(inspection.grant.rawValue) grant")
            case .failed?: again = Check("refresh", .fail, "a forced refresh failed: \(inspection.refresh?.error.map(describe) ?? "")")
            case .notPossible?, nil: again = Check("refresh", .skip, "not tried")
            }
            return [Check("refresh_token", .skip, "\(inspection.grant.rawValue) grant: tokens are obtained again, not refreshed"), again]
        }
        guard inspection.refreshToken else {
            let noRefresh = Check("refresh", .skip, "no refresh token to refresh with")
            guard let seconds = inspection.accessTokenLifetimeSeconds else {
                return [Check("refresh_token", .pass, "none issued, none needed: the access token never expires"), noRefresh]
            }
            return [
                Check(
                    "refresh_token",
                    .warn,
                    "none issued: each sign-in lasts as long as its access token (\(seconds) s), then the user signs in again (does the provider want offline_access?)"
                ),
                noRefresh,
            ]
        }
        let issued = Check("refresh_token", .pass, "issued")
        switch inspection.refresh {
        case let facts? where facts.status == .refreshed:
            let rotation = facts.rotated == true ? "the refresh token was rotated" : "the refresh token was not rotated (reused)"
            return [issued, Check("refresh", .pass, "a forced refresh succeeded; \(rotation)")]
        case let facts? where facts.status == .failed:
            return [issued, Check("refresh", .fail, "a forced refresh failed: \(facts.error.map(describe) ?? "")")]
        default:
            return [issued, Check("refresh", .skip, "not tried")]
        }
    }

    private static func userinfo(_ inspection: SessionInspection) -> Check {
        guard let facts = inspection.userinfo else { return Check("userinfo", .skip, "not asked") }
        switch facts.status {
        case .answered: return Check("userinfo", .pass, "answered with \((facts.claims ?? []).joined(separator: ", "))")
        case .notOffered: return Check("userinfo", .skip, "the provider has no userinfo endpoint")
        case .failed: return Check("userinfo", .fail, facts.error.map(describe) ?? "failed")
        }
    }

    private static func revocation(_ signOut: LogoutResult?) -> Check {
        guard let signOut else { return Check("revocation", .skip, "the session was kept (--keep)") }
        guard let report = signOut.revocation else { return Check("revocation", .skip, "there was nothing to revoke") }
        switch report.status {
        case .revoked: return Check("revocation", .pass, "the provider revoked the tokens at sign-out")
        case .notOffered: return Check("revocation", .skip, "the provider has no revocation endpoint: its tokens expire on their own")
        case .refused, .failed: return Check("revocation", .fail, "at sign-out: \(report.message ?? report.status.rawValue)")
        case .unknown: return Check("revocation", .skip, "the provider does not say whether it revoked the tokens")
        }
    }

    private static func dpop(_ inspection: SessionInspection) -> Check {
        let facts = inspection.dpop
        guard facts.required else { return Check("dpop", .skip, "not asked (the provider file's dpop is not required)") }
        guard facts.bound, let jkt = facts.jkt else {
            return Check("dpop", .fail, "asked, but the provider issued \(inspection.tokenType) tokens, not bound to the session's key")
        }
        return Check("dpop", .pass, "the tokens are bound to the session's key (jkt \(jkt))")
    }

    private static func describe(_ problem: InspectionProblem) -> String {
        "\(problem.message) [\(problem.reason.rawValue)]"
    }
}

extension ProviderTestReport {
    /// For a person: one line per check (the mark, what was checked, the detail), then the verdict.
    package var text: String {
        let labels = [
            "sign_in": "sign-in", "id_token": "ID token", "claims": "claims", "scopes": "scopes",
            "access_token_lifetime": "access token lifetime", "refresh_token": "refresh token", "refresh": "forced refresh",
            "userinfo": "userinfo", "revocation": "revocation", "dpop": "DPoP",
        ]
        let width = labels.values.map(\.count).max() ?? 0
        var text = ""
        for check in checks {
            let mark = ["pass": "✓", "warn": "!", "fail": "✗", "skip": "–"][check.outcome.rawValue] ?? "?"
            let label = labels[check.name] ?? check.name
            text += "\(mark) \(label)\(String(repeating: " ", count: width - label.count))  \(Terminal.safe(check.detail))\n"
        }
        func count(_ outcome: ProviderTestReport.Check.Outcome, _ noun: String) -> String {
            let number = checks.filter { $0.outcome == outcome }.count
            return "\(number) \(noun)\(number == 1 ? "" : "s")"
        }
        let warned = checks.contains { $0.outcome == .warn }
        switch (passed, warned) {
        case (true, false): text += "\(provider): every check passed.\n"
        case (true, true): text += "\(provider): no check failed; \(count(.warn, "warning")).\n"
        case (false, false): text += "\(provider): \(count(.fail, "check")) failed.\n"
        case (false, true): text += "\(provider): \(count(.fail, "check")) failed; \(count(.warn, "warning")).\n"
        }
        return text
    }
}
