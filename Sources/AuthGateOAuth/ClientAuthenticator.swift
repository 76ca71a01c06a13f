import AuthGateCore
import Crypto
import FoundationEssentials
import _CryptoExtras

/// How authgate proves it is the provider's client at every endpoint that authenticates
/// clients (token, revocation, device authorization, PAR): a shared secret (RFC 6749 §2.3.1),
/// a signed assertion (RFC 7523 §2.2, OpenID Connect Core §9), the platform's JWT as the
/// assertion (workload identity federation), or the TLS client certificate, which the
/// transport presents (RFC 8705; the request then only names the client).
struct ClientAuthenticator: Sendable {
    let clientID: String
    let method: ClientAuthentication
    let secret: Secret?
    let signingKey: ClientSigningKey?
    /// `client_assertion_file`: read by the caller for each request (``WorkloadTokenFile``).
    var assertionFile: WorkloadTokenFile?

    /// The `client_assertion_type` of RFC 7523 §2.2.
    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// How long an assertion is valid: OpenID Connect Core §9 wants a short `exp`; authgate
    /// caps it at a minute.
    static let assertionLifetime: TimeInterval = 60

    /// Adds this client's authentication to a request to `endpoint`; `client_id` is added to
    /// the fields where the method needs it and they lack it (a pushed authorization request
    /// carries its own).
    /// - Parameter platformAssertion: The JWT ``assertionFile`` holds now, for `client_assertion_file`.
    func authenticate(
        fields: inout [(String, String)],
        headers: inout [(name: String, value: String)],
        endpoint: URL,
        now: Date,
        platformAssertion: String? = nil
    ) {
        let namesClient = fields.contains { $0.0 == "client_id" }
        let clientIDField = namesClient ? [] : [("client_id", clientID)]
        switch method {
        case .clientSecretBasic:
            // RFC 6749 §2.3.1: both parts form-encoded before Base64.
            let pair = FormEncoding.escape(clientID) + ":" + FormEncoding.escape(secret?.exposedValue ?? "")
            headers.append(("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()))
        case .clientSecretPost:
            fields += clientIDField + [("client_secret", secret?.exposedValue ?? "")]
        case .clientSecretJWT, .privateKeyJWT:
            fields +=
                clientIDField + [
                    ("client_assertion_type", Self.assertionType),
                    ("client_assertion", assertion(audience: endpoint, now: now)),
                ]
        case .clientAssertionFile:
            // RFC 7521 §4.2 with the platform's JWT: the provider trusts its issuer for this client.
            fields += clientIDField + [("client_assertion_type", Self.assertionType), ("client_assertion", platformAssertion ?? "")]
        case .tlsClientAuth, .selfSignedTLSClientAuth, .none:
            // RFC 8705 §2: the certificate authenticates; the request names the client.
            fields += clientIDField
        }
    }

    /// A client assertion (RFC 7523 §3): `iss` = `sub` = the client, `aud` the endpoint's URL
    /// (OpenID Connect Core §9; RFC 9126 §2 has PAR endpoints accept it too), a fresh `jti`
    /// against replay, and `exp` a minute ahead.
    func assertion(audience: URL, now: Date) -> String {
        let issuedAt = Int(now.timeIntervalSince1970)
        let claims = AssertionClaims(
            iss: clientID,
            sub: clientID,
            aud: audience.absoluteString,
            jti: uniqueTokenIdentifier(),
            iat: issuedAt,
            exp: issuedAt + Int(Self.assertionLifetime)
        )
        if method == .privateKeyJWT, let signingKey {
            return signingKey.sign(claims)
        }
        // client_secret_jwt: HMAC-SHA256 keyed with the secret's octets.
        let key = SymmetricKey(data: Array((secret?.exposedValue ?? "").utf8))
        return CompactJWS.sign(header: AssertionHeader(alg: "HS256", kid: nil), claims: claims) { input in
            Array(HMAC<SHA256>.authenticationCode(for: input, using: key))
        }
    }
}

/// The JOSE header of the assertions authgated signs.
struct AssertionHeader: Encodable {
    var alg: String
    var typ = "JWT"
    var kid: String?

    init(alg: String, kid: String?) {
        self.alg = alg
        self.kid = kid
    }
}

/// The claims of an assertion (RFC 7523 §3); `scope` for a `jwt_bearer` grant's, as Google's
/// service accounts want it.
struct AssertionClaims: Encodable {
    var iss: String
    var sub: String
    var aud: String
    var jti: String
    var iat: Int
    var exp: Int
    var scope: String?
}

/// The private key of `private_key_jwt`: EC P-256 (ES256) or RSA (RS256), from a PEM file.
enum ClientSigningKey: Sendable {
    case ec(P256.Signing.PrivateKey, keyID: String?)
    case rsa(_RSA.Signing.PrivateKey, keyID: String?)

    /// A compact JWS of `claims`: ES256 or RS256, with the key's `kid`.
    func sign(_ claims: AssertionClaims) -> String {
        switch self {
        case .ec(let key, let keyID):
            return CompactJWS.sign(header: AssertionHeader(alg: "ES256", kid: keyID), claims: claims, with: key)
        case .rsa(let key, let keyID):
            return CompactJWS.sign(header: AssertionHeader(alg: "RS256", kid: keyID), claims: claims) { input in
                (try? key.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation).map(Array.init) ?? []
            }
        }
    }

    /// - Returns: `nil` when the PEM holds neither (SEC 1, PKCS #1 and PKCS #8 are read).
    init?(pem: String, keyID: String?) {
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
            self = .ec(key, keyID: keyID)
        } else if let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) {
            self = .rsa(key, keyID: keyID)
        } else {
            return nil
        }
    }
}
