import FoundationEssentials

/// A token narrower than the session's own: fewer scopes (RFC 6749 §6, `scope` on a refresh)
/// or one resource server (RFC 8707, `resource`), the `scopes` and `resource` of `token`; or a
/// token exchanged for the session's (RFC 8693), the params of `token.exchange`.
///
/// The daemon obtains it with the session's refresh token (or, for a client-credentials
/// session, by asking again; for an exchange, by exchanging again) and caches it per variant.
public struct TokenVariant: Sendable, Hashable, CustomStringConvertible {
    /// Sorted and without duplicates, so that `["b", "a"]` and `["a", "b", "a"]` share a cache
    /// entry; empty means the session's own scopes.
    public let scopes: [String]
    /// An absolute URI without a fragment (RFC 8707 §2).
    public let resource: String?
    /// Obtained by token exchange (RFC 8693) rather than by refresh.
    public let exchange: TokenExchange?

    public init(scopes: [String] = [], resource: String? = nil, exchange: TokenExchange? = nil) {
        self.scopes = Array(Set(scopes)).sorted()
        self.resource = resource
        self.exchange = exchange
    }

    /// True when it asks for nothing beyond the session's own token.
    public var isEmpty: Bool { scopes.isEmpty && resource == nil && exchange == nil }

    public var description: String {
        var parts: [String] = []
        if let exchange {
            parts.append("exchange")
            if let audience = exchange.audience { parts.append("audience=\(audience)") }
            if let type = exchange.requestedTokenType { parts.append("requested_token_type=\(type)") }
        }
        if !scopes.isEmpty { parts.append("scopes=\(scopes.joined(separator: " "))") }
        if let resource { parts.append("resource=\(resource)") }
        return parts.isEmpty ? "session" : parts.joined(separator: ", ")
    }

    /// What a token exchange asks for beyond `scopes` and `resource` (RFC 8693 §2.1).
    public struct TokenExchange: Sendable, Hashable {
        /// The logical name of the service the token is for.
        public let audience: String?
        /// A token type URI, e.g. `urn:ietf:params:oauth:token-type:access_token` (§3).
        public let requestedTokenType: String?

        public init(audience: String? = nil, requestedTokenType: String? = nil) {
            self.audience = audience
            self.requestedTokenType = requestedTokenType
        }
    }

    /// `validation_failed` unless each scope is a valid `scope-token` (RFC 6749 §3.3);
    /// `invalid_params` unless the resource is an absolute URI without a fragment made of
    /// RFC 3986 characters only (RFC 8707 §2): anything else, a space, a CR LF, a NUL, a
    /// non-ASCII letter, is refused rather than percent-encoded on the caller's behalf.
    public func validate() throws(AuthGateError) {
        if let resource, !Self.isResourceURI(resource) {
            throw AuthGateError(
                .invalidParams,
                "resource must be an absolute URI without a fragment, of RFC 3986 characters only, like https://api.example.com.",
                fields: [FieldError(field: "resource", message: "must be an absolute URI without a fragment, like https://api.example.com")]
            )
        }
        var fields: [FieldError] = []
        let scopeCharacters = { (c: Unicode.Scalar) in c == "!" || (c >= "#" && c <= "[") || (c >= "]" && c <= "~") }
        if scopes.contains(where: { $0.isEmpty || $0.count > 256 || !$0.unicodeScalars.allSatisfy(scopeCharacters) }) {
            fields.append(FieldError(field: "scopes", message: "each scope must be 1–256 printable ASCII characters without spaces, quotes or backslashes"))
        }
        if let exchange {
            let printable = { (text: String) in !text.isEmpty && text.utf8.count <= 2048 && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } }
            if let audience = exchange.audience, !printable(audience) {
                fields.append(FieldError(field: "audience", message: "must be 1–2048 printable ASCII characters without spaces"))
            }
            // RFC 8693 §3 names the types; a refresh token (or a SAML assertion) is not one a
            // program gets: it would outlive the session's logout and a narrowed `access`.
            if let type = exchange.requestedTokenType, !TokenExchangePolicy.issuableTypes.contains(type) {
                let allowed = TokenExchangePolicy.issuableTypes.joined(separator: ", ")
                throw AuthGateError(
                    .invalidParams,
                    "requested_token_type must be one of \(allowed): authgated never hands out a refresh token.",
                    fields: [FieldError(field: "requested_token_type", message: "must be one of \(allowed)")]
                )
            }
        }
        if !fields.isEmpty { throw .validationFailed(fields) }
    }

    /// RFC 8707 §2 with RFC 3986 §3: `scheme ":" …` with a host, at most 2,048 characters of
    /// the unreserved, reserved and `%XX` sets, and no `#`.
    static func isResourceURI(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 2048, let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        let isAlpha = { (b: UInt8) in (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") }
        let isDigit = { (b: UInt8) in b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        guard isAlpha(bytes[0]), bytes[1..<colon].allSatisfy({ isAlpha($0) || isDigit($0) || "+-.".utf8.contains($0) }) else { return false }
        let allowed = Set("-._~:/?[]@!$&'()*+,;=".utf8)
        var index = colon + 1
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, bytes[index + 1].hexDigitValue != nil, bytes[index + 2].hexDigitValue != nil else { return false }
                index += 3
                continue
            }
            guard isAlpha(byte) || isDigit(byte) || allowed.contains(byte) else { return false }
            index += 1
        }
        // A host after "//" (RFC 8707 names the resource server by its location).
        let rest = bytes[(colon + 1)...]
        guard rest.starts(with: "//".utf8) else { return false }
        let authority = rest.dropFirst(2).prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") }
        let host = authority.split(separator: UInt8(ascii: "@")).last ?? []
        return !host.isEmpty && host.first != UInt8(ascii: ":")
    }
}
