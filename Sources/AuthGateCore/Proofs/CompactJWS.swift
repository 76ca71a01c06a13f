public import Crypto
import FoundationEssentials

/// Signs a JSON Web Signature in compact serialization (RFC 7515 §7.1): the JWTs that
/// authgate itself issues, DPoP proofs (RFC 9449) and client assertions (RFC 7523).
public enum CompactJWS {
    /// `BASE64URL(header) "." BASE64URL(claims) "." BASE64URL(signature)`, the signature over
    /// the first two parts as ASCII.
    /// - Parameter sign: Signs the signing input; for ES256 it returns `r || s` (RFC 7518 §3.4).
    public static func sign(
        header: some Encodable,
        claims: some Encodable,
        with sign: (_ signingInput: [UInt8]) throws -> [UInt8]
    ) rethrows -> String {
        let signingInput = Base64URL.encode(encode(header)) + "." + Base64URL.encode(encode(claims))
        return signingInput + "." + Base64URL.encode(try sign(Array(signingInput.utf8)))
    }

    /// An ES256 JWS (RFC 7518 §3.4: the signature is `r || s`). P-256 signing fails only on a
    /// broken random generator; the JWS then has an empty signature, which any verifier refuses.
    public static func sign(header: some Encodable, claims: some Encodable, with key: P256.Signing.PrivateKey) -> String {
        sign(header: header, claims: claims) { input in
            (try? key.signature(for: input).rawRepresentation).map(Array.init) ?? []
        }
    }

    /// Sorted keys, so that equal values encode to equal bytes; encoding plain structs of
    /// strings and numbers cannot fail.
    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }
}

/// A fresh `jti` (RFC 7519 §4.1.7): 128 random bits, base64url.
public func uniqueTokenIdentifier() -> String {
    Secret.random(bytes: 16).exposedValue
}
