import Crypto
public import FoundationEssentials

/// The key a session's tokens are bound to (DPoP, RFC 9449): an ES256 (P-256) key the daemon
/// generates per session and never hands out. Programs get proofs signed with it, not the key.
///
/// It prints as its JWK thumbprint only; ``storageRepresentation`` is the one way out, into the
/// sealed session file.
public struct DPoPKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The key and what is derived from it, in one object that every copy shares: a
    /// ``TokenSet`` holds an optional key inline, and unboxed these ~90 bytes sat in every
    /// session's tokens, bound or not (8 bytes now; docs/BENCHMARKS.md, "Bytes per session").
    private final class Parts: Sendable {
        let key: P256.Signing.PrivateKey
        let publicJWK: PublicJWK
        let thumbprint: String

        init(key: P256.Signing.PrivateKey, publicJWK: PublicJWK, thumbprint: String) {
            self.key = key
            self.publicJWK = publicJWK
            self.thumbprint = thumbprint
        }
    }

    private let parts: Parts
    private var key: P256.Signing.PrivateKey { parts.key }
    /// The public key as a JWK (RFC 7517), members in RFC 7638 order.
    public var publicJWK: PublicJWK { parts.publicJWK }
    /// `BASE64URL(SHA-256(JWK))` (RFC 7638): what a bound token's `cnf.jkt` holds.
    public var thumbprint: String { parts.thumbprint }

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
        // The uncompressed point without its 0x04: x then y, 32 bytes each.
        let point = Array(key.publicKey.x963Representation.dropFirst())
        let publicJWK = PublicJWK(crv: "P-256", kty: "EC", x: Base64URL.encode(Array(point.prefix(32))), y: Base64URL.encode(Array(point.suffix(32))))
        let thumbprint = Base64URL.encode(Array(SHA256.hash(data: CompactJWS.encode(publicJWK))))
        parts = Parts(key: key, publicJWK: publicJWK, thumbprint: thumbprint)
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
            jti: uniqueTokenIdentifier(),
            htm: method,
            htu: Self.targetURI(url),
            iat: Int(now.timeIntervalSince1970),
            nonce: nonce,
            ath: accessToken.map { Base64URL.encode(Array(SHA256.hash(data: Array($0.exposedValue.utf8)))) }
        )
        return CompactJWS.sign(header: header, claims: claims, with: key)
    }

    /// RFC 9449 §8.1: `1*NQCHAR`, NQCHAR = %x21 / %x23-5B / %x5D-7E (printable ASCII but
    /// space, `"` and `\`); at most 1 KiB here, as a nonce goes into every later proof.
    public static func isValidNonce(_ nonce: String) -> Bool {
        !nonce.isEmpty && nonce.utf8.count <= 1024
            && nonce.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    /// The proof's `htu` (RFC 9449 §4.2, §4.3 step 9): the URL without query, fragment and
    /// user information, normalised as RFC 3986 §6.2.2 and §6.2.3 say — scheme and host in
    /// lower case, percent-encodings in upper case and unreserved characters decoded, dot
    /// segments removed, the scheme's default port dropped, an empty path made `/` — so that
    /// it compares equal to what the resource server sees.
    public static func targetURI(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), let scheme = components.scheme?.lowercased() else {
            return url.absoluteString
        }
        components.query = nil
        components.fragment = nil
        components.user = nil
        components.password = nil
        components.scheme = scheme
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        if (scheme == "https" && components.port == 443) || (scheme == "http" && components.port == 80) { components.port = nil }
        components.percentEncodedPath = removingDotSegments(normalisingPercentEncoding(components.percentEncodedPath))
        return components.string ?? url.absoluteString
    }

    /// RFC 3986 §6.2.2.1 and §6.2.2.2: `%xx` with upper-case digits, and unreserved characters
    /// (letters, digits, `-._~`) not encoded at all.
    static func normalisingPercentEncoding(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) {
                let decoded = high << 4 | low
                let unreserved =
                    (decoded >= 0x41 && decoded <= 0x5A) || (decoded >= 0x61 && decoded <= 0x7A) || (decoded >= 0x30 && decoded <= 0x39)
                    || Array("-._~".utf8).contains(decoded)
                if unreserved {
                    output.append(decoded)
                } else {
                    let digits = Array("0123456789ABCDEF".utf8)
                    output += [UInt8(ascii: "%"), digits[Int(high)], digits[Int(low)]]
                }
                index += 3
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// RFC 3986 §5.2.4 for a URL's path: `.` and `..` segments resolved; the result starts with `/`.
    static func removingDotSegments(_ path: String) -> String {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false)
        if path.hasPrefix("/") { segments.removeFirst() }
        var output: [Substring] = []
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
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
