import AuthGateCore
import FoundationEssentials
import JWTKit

/// The claims of an ID token that authgate checks (OpenID Connect Core §2, §3.1.3.7).
struct IDTokenClaims: JWTPayload {
    var iss: String
    var sub: String
    var aud: AudienceClaim
    var exp: Double
    var iat: Double
    var nonce: String?
    var azp: String?
    /// Microsoft Entra ID's tenant (`tid`): fills the `{tenantid}` of an `issuer_template`.
    var tid: String?
    /// Standard claims (OIDC Core §5.1) for the name shown to the user; never checked.
    var preferred_username: String?
    var email: String?
    var name: String?

    /// The name the user knows (OIDC Core §5.1), where the subject is an opaque identifier.
    var displayName: String? { SignInResult.displayName(preferredUsername: preferred_username, email: email, name: name) }

    /// Claims are checked by ``IDTokenVerifier`` with its own clock and leeway (jwt-kit has
    /// no leeway setting); this checks nothing so the signature check can run first.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Verifies ID tokens against the provider's JWKS.
///
/// Keys are added one by one (jwt-kit refuses a whole set for one odd key) and the odd ones
/// are reported; a key without a `kid` is kept for tokens that name none. A token signed with an unknown `kid` makes it fetch the JWKS once more (the
/// provider may have rotated its keys); a `kid` still unknown after that fails.
actor IDTokenVerifier {
    /// Clock skew tolerated on `exp` and `iat`.
    static let leeway: TimeInterval = 60
    /// Asymmetric algorithms only: "none" and HMAC (which would use a public key as the
    /// shared secret) are refused whatever the JWKS says.
    static let allowedAlgorithms: Set<String> = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]

    private let provider: String
    private let fetchJWKS: @Sendable () async throws(AuthGateError) -> [UInt8]
    private var keys = JWTKeyCollection()
    private var kids: Set<String> = []
    /// Every usable key, named or not (RFC 7517 makes `kid` optional), with the fields that say
    /// which algorithms it fits: a token that names no `kid` is verified with the only published
    /// key that fits its `alg` (OIDC Core §10.1 asks for a `kid` in the header only when there
    /// are several keys).
    private var published: [PublishedKey] = []
    private var loaded = false

    /// A usable key of the JWKS and what it fits.
    private struct PublishedKey: Sendable {
        var jwk: JWK
        var kty: String?
        var crv: String?
        var alg: String?

        /// Whether the key can have made a signature with `algorithm` (RFC 7518 §3.1, RFC 8037).
        func fits(_ algorithm: String) -> Bool {
            if let alg, alg != algorithm { return false }
            switch algorithm {
            case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512": return kty == "RSA"
            case "ES256": return kty == "EC" && crv == "P-256"
            case "ES384": return kty == "EC" && crv == "P-384"
            case "ES512": return kty == "EC" && crv == "P-521"
            case "EdDSA": return kty == "OKP"
            default: return false
            }
        }
    }

    init(provider: String, fetchJWKS: @escaping @Sendable () async throws(AuthGateError) -> [UInt8]) {
        self.provider = provider
        self.fetchJWKS = fetchJWKS
    }

    /// Fetches the JWKS and replaces the keys.
    /// - Returns: Problems with keys that were skipped, for the validation report.
    @discardableResult
    func reload() async throws(AuthGateError) -> [String] {
        let body = try await fetchJWKS()
        guard let object = (try? JSONValue.parse(Data(body)))?.objectValue, case .array(let entries) = object["keys"] else {
            throw ProviderFailure.malformed(provider, what: "JWKS", "it is not a JSON object with a \"keys\" array")
        }
        let collection = JWTKeyCollection()
        var found: Set<String> = []
        var usable: [PublishedKey] = []
        var skipped: [String] = []
        for (index, entry) in entries.enumerated() {
            let fields = entry.objectValue ?? [:]
            let kid = fields["kid"]?.stringValue
            do {
                var jwk = try JSONDecoder().decode(JWK.self, from: try JSONEncoder().encode(entry))
                if let kid {
                    try await collection.add(jwk: jwk)
                    found.insert(kid)
                } else {
                    // Checked by a collection of its own under a name no header can give it.
                    jwk.keyIdentifier = JWKIdentifier(string: "")
                    try await JWTKeyCollection().add(jwk: jwk)
                }
                usable.append(
                    PublishedKey(jwk: jwk, kty: fields["kty"]?.stringValue, crv: fields["crv"]?.stringValue, alg: fields["alg"]?.stringValue)
                )
            } catch {
                skipped.append("JWKS key #\(index)\(kid.map { " (kid \($0))" } ?? "") was skipped: unsupported or malformed")
            }
        }
        guard !usable.isEmpty else {
            throw ProviderFailure.malformed(provider, what: "JWKS", "it holds no usable signing key")
        }
        keys = collection
        kids = found
        published = usable
        loaded = true
        return skipped
    }

    /// Verifies `token`'s signature and claims.
    /// - Parameters:
    ///   - issuer: The exact `iss` expected.
    ///   - issuerTemplate: Instead of `issuer`: the `iss` expected with `{tenantid}` standing for
    ///     the token's `tid` (`issuer_template`).
    ///   - clientID: Must be in `aud` (and be `azp` when there are several audiences).
    ///   - nonce: The nonce sent with the authorization request, if any.
    /// - Throws: `server_error` naming what failed.
    func verify(
        _ token: Secret,
        issuer: String,
        issuerTemplate: String? = nil,
        clientID: String,
        nonce: String?,
        now: Date
    ) async throws(AuthGateError) -> IDTokenClaims {
        let header = try Self.header(of: token.exposedValue, provider: provider)
        guard let algorithm = header.alg, Self.allowedAlgorithms.contains(algorithm) else {
            throw failure("it uses the algorithm \"\(header.alg ?? "none")\", which authgate does not accept")
        }
        if !loaded || (header.kid.map { !kids.contains($0) } ?? false) {
            try await reload()
        }
        if let kid = header.kid, !kids.contains(kid) {
            throw failure("it is signed with a key the provider does not publish (kid \(kid.prefix(64)))")
        }
        var verifier = keys
        if header.kid == nil {
            // No kid: the one published key that fits the token's algorithm, named or not.
            let fitting = published.filter { $0.fits(algorithm) }
            guard fitting.count == 1, var only = fitting.first?.jwk else {
                throw failure(
                    fitting.isEmpty
                        ? "it names no key (kid) and the provider publishes none for its algorithm \(algorithm)"
                        : "it names no key (kid) and the provider publishes several for its algorithm \(algorithm)"
                )
            }
            only.keyIdentifier = only.keyIdentifier ?? JWKIdentifier(string: "")
            verifier = JWTKeyCollection()
            do {
                try await verifier.add(jwk: only, isDefault: true)
            } catch {
                throw failure("its key cannot be used")
            }
        }
        let claims: IDTokenClaims
        do {
            claims = try await verifier.verify(token.exposedValue, as: IDTokenClaims.self)
        } catch {
            throw failure("its signature does not verify")
        }
        var issuer = issuer
        if let issuerTemplate {
            guard let tenant = claims.tid, let expected = ProviderQuirks.issuer(issuerTemplate, tenant: tenant) else {
                throw failure("it carries no tenant id (tid) to fill the issuer template \"\(issuerTemplate)\"")
            }
            issuer = expected
        }
        guard claims.iss == issuer else { throw failure("it was issued by \"\(claims.iss.prefix(128))\", not \"\(issuer)\"") }
        guard claims.aud.value.contains(clientID) else { throw failure("it is not meant for this client (aud)") }
        if claims.aud.value.count > 1 || claims.azp != nil, claims.azp != clientID {
            throw failure("it was issued to another party (azp)")
        }
        let current = now.timeIntervalSince1970
        guard claims.exp + Self.leeway > current else { throw failure("it has expired") }
        guard claims.iat - Self.leeway <= current else { throw failure("it was issued in the future (iat)") }
        if let nonce, claims.nonce != nonce { throw failure("its nonce does not match the one sent") }
        return claims
    }

    private func failure(_ why: String) -> AuthGateError {
        AuthGateError(.serverError, "The ID token from \(provider) was refused: \(why).")
    }

    /// The JOSE header, read (with jwt-kit's parser) before any key is chosen.
    private static func header(of token: String, provider: String) throws(AuthGateError) -> (alg: String?, kid: String?) {
        do {
            let header = try DefaultJWTParser().parse(Array(token.utf8), as: UncheckedPayload.self).header
            return (header.alg, header.kid)
        } catch {
            throw AuthGateError(.serverError, "The ID token from \(provider) was refused: it is not a signed JWT.")
        }
    }
}

/// Any JSON object as a payload: the header is read before the claims are checked.
private struct UncheckedPayload: JWTPayload {
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
