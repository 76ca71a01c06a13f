public import AuthGateCore
import FoundationEssentials

/// A service's sign-in: client credentials, or the platform's token of workload identity
/// federation (`jwt_bearer`, `token_exchange`; docs/CONFIGURATION.md).
extension RemoteIdentityProvider {
    /// Client credentials (RFC 6749 §4.4), the JWT bearer grant (RFC 7523 §2.1) or the
    /// exchange of the platform's token (RFC 8693): the service's own token, with no refresh
    /// token to keep (the session signs in again before it expires).
    public func signInAsService(_ grant: Grant, _ variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> SignInResult {
        // The file's scopes as written: a server that grants a client only what it asks for
        // refuses a request stripped of, say, `openid` that its policy requires.
        let scopes = variant.scopes.isEmpty ? configuration.scopes : variant.scopes
        let metadata = try await resolvedMetadata()
        let workload = settings.workload
        let platformFile = { (path: String, field: String) in WorkloadTokenFile(path: path, field: field, provider: self.name) }
        var fields: [(String, String)]
        var platformToken: WorkloadField?
        var subject = "client:" + settings.clientID
        switch grant {
        case .clientCredentials:
            fields = ClientCredentialsGrant.fields(scopes: scopes, audience: settings.audience, resource: variant.resource)
        case .jwtBearer:
            fields = JWTBearerGrant.fields(scopes: scopes, audience: settings.audience, resource: variant.resource)
            if let path = workload.assertionFile {
                platformToken = WorkloadField(name: "assertion", file: platformFile(path, "assertion_file"))
            } else if let key = assertionSigningKey, let keySettings = workload.assertionKey {
                let assertion = JWTBearerGrant.signedAssertion(
                    key: key,
                    settings: keySettings,
                    clientID: settings.clientID,
                    tokenEndpoint: metadata.tokenEndpoint,
                    scopes: scopes,
                    now: now()
                )
                fields.append(("assertion", assertion))
                subject = keySettings.subject ?? keySettings.issuer ?? settings.clientID
            }
        case .tokenExchange:
            guard let path = workload.subjectTokenFile else { throw Self.notConfigured(grant, provider: name) }
            fields = TokenExchangeGrant.signInFields(
                subjectTokenType: workload.subjectTokenType,
                scopes: scopes,
                audience: settings.audience,
                resource: variant.resource
            )
            platformToken = WorkloadField(name: "subject_token", file: platformFile(path, "subject_token_file"))
        case .password, .deviceCode, .authorizationCode:
            throw Self.notConfigured(grant, provider: name)
        }
        var tokens = try await tokenEndpoint.requestTokens(
            at: metadata.tokenEndpoint,
            fields,
            purpose: grant == .clientCredentials ? .clientSignIn : .workloadSignIn(platformToken?.file),
            requestedScopes: scopes,
            proofKey: proofKey ?? newProofKey(),
            workload: platformToken,
            now: now()
        )
        if grant == .tokenExchange {
            tokens.issuedTokenType = try TokenExchangeGrant.issuedTokenType(tokens, provider: name)
            tokens.refreshToken = nil  // exchanged again with the platform's current token instead
        }
        // The platform's identity names the session (`status`): its token's `sub`.
        if let file = platformToken?.file, let token = try? file.read(now: now()),
            case .string(let platformSubject)? = WorkloadTokenFile.claims(of: token)?["sub"]
        {
            subject = platformSubject
        }
        return SignInResult(tokens: tokens, subject: subject)
    }

    public nonisolated func platformTokenRevision(for grant: Grant) -> String? {
        let path: String? =
            switch grant {
            case .tokenExchange: settings.workload.subjectTokenFile
            case .jwtBearer: settings.workload.assertionFile
            default: nil
            }
        return path.flatMap { WorkloadTokenFile(path: $0, field: "", provider: configuration.id.rawValue).revision() }
    }

    private static func notConfigured(_ grant: Grant, provider: String) -> AuthGateError {
        AuthGateError(.unsupportedGrant, "\(provider) does not sign services in with the \(grant.rawValue) grant.")
    }
}
