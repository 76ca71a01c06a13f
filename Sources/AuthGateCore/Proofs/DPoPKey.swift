public import FoundationEssentials
import Crypto

/// The key a session's tokens are bound to (DPoP, RFC 9449): an ES256 (P-256) key the daemon
/// generates per session and never hands out. Programs get proofs signed with it, not the key.
///
/// It prints as its JWK thumbprint only; ``storageRepresentation`` is the one way out, into the
/// sealed session file.
public struct DPoPKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private let key: P256.Signing.PrivateKey
    /// The public key as a JWK (RFC 7517), members in RFC 7638 order.
    public let publicJWK: PublicJWK
    /// `BASE64URL(SHA-256(JWK))` (RFC 7638): what a bound token's `cnf.jkt` holds.
    public let thumbprint: String

    /// A new key.
    public init() {
        self.init(P256.Signing.PrivateKey())
    }

    /// A key read back from the session file.
    /// - Throws: When the bytes are not a P-256 private scalar.
    public init(storageRepresentation bytes: [UInt8]) throws {
        self.init(try P256.Signing.PrivateKey(rawRepresentation: bytes))
    }

    private init(_ key: P256.Signing.PrivateKey) {
        self.key = key
        // The uncompressed point without its 0x04: x then y, 32 bytes each.
        let point = Array(key.publicKey.x963Representation.dropFirst())
        publicJWK = PublicJWK(crv: "P-256", kty: "EC", x: Base64URL.encode(Array(point.prefix(32))), y: Base64URL.encode(Array(point.suffix(32))))
        thumbprint = Base64URL.encode(Array(SHA256.hash(data: CompactJWS.encode(publicJWK))))
    }

    /// The private scalar, for the sealed session file only.
    public var storageRepresentation: [UInt8] { Array(key.rawRepresentation) }

    /// A DPoP proof JWT (RFC 9449 §4.2) for one request.
    /// - Parameters:
    ///   - method: `htm`, the request's method, e.g. `POST`.
    ///   - url: `htu`; its query and fragment are left out.
    ///   - nonce: The server's `DPoP-Nonce`, when it asked for one (§8, §9).
    ///   - accessToken: The token the request presents, hashed into `ath` (§4.2) for resource requests.
    public func proof(method: String, url: URL, nonce: String? = nil, accessToken: Secret? = nil, at now: Date) -> String {
        let header = ProofHeader(typ: "dpop+jwt", alg: "ES256", jwk: publicJWK)
        let claims = ProofClaims(
            jti: uniqueTokenIdentifier(), htm: method, htu: Self.targetURI(url), iat: Int(now.timeIntervalSince1970), nonce: nonce,
            ath: accessToken.map { Base64URL.encode(Array(SHA256.hash(data: Array($0.exposedValue.utf8)))) })
        return CompactJWS.sign(header: header, claims: claims, with: key)
    }

    /// RFC 9449 §8.1: `1*NQCHAR` (printable ASCII but `"` and `\`); at most 1 KiB here, as a
    /// nonce goes into every later proof.
    public static func isValidNonce(_ nonce: String) -> Bool {
        !nonce.isEmpty && nonce.utf8.count <= 1024
            && nonce.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    /// The URL without query and fragment (RFC 9449 §4.2 `htu`).
    static func targetURI(_ url: URL) -> String {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        components?.query = nil
        components?.fragment = nil
        return components?.string ?? url.absoluteString
    }

    public static func == (lhs: DPoPKey, rhs: DPoPKey) -> Bool { lhs.thumbprint == rhs.thumbprint }
    public func hash(into hasher: inout Hasher) { hasher.combine(thumbprint) }

    public var description: String { "DPoPKey(jkt: \(thumbprint))" }
    public var debugDescription: String { description }

    /// An EC public key as a JWK, with exactly the members RFC 7638 §3.2 hashes.
    public struct PublicJWK: Sendable, Hashable, Codable {
        public var crv: String
        public var kty: String
        public var x: String
        public var y: String
    }

    private struct ProofHeader: Encodable {
        var typ: String
        var alg: String
        var jwk: PublicJWK
    }

    private struct ProofClaims: Encodable {
        var jti: String
        var htm: String
        var htu: String
        var iat: Int
        var nonce: String?
        var ath: String?
    }
}
