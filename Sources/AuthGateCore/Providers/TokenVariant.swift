import FoundationEssentials

/// A token narrower than the session's own: fewer scopes (RFC 6749 §6, `scope` on a refresh)
/// or one resource server (RFC 8707, `resource`). The `scopes` and `resource` of `token`.
///
/// The daemon obtains it with the session's refresh token (or, for a client-credentials
/// session, by asking again) and caches it per variant.
public struct TokenVariant: Sendable, Hashable, CustomStringConvertible {
    /// Sorted and without duplicates, so that `["b", "a"]` and `["a", "b", "a"]` share a cache
    /// entry; empty means the session's own scopes.
    public let scopes: [String]
    /// An absolute URI without a fragment (RFC 8707 §2).
    public let resource: String?

    public init(scopes: [String] = [], resource: String? = nil) {
        self.scopes = Array(Set(scopes)).sorted()
        self.resource = resource
    }

    /// True when it asks for nothing beyond the session's own token.
    public var isEmpty: Bool { scopes.isEmpty && resource == nil }

    public var description: String {
        var parts: [String] = []
        if !scopes.isEmpty { parts.append("scopes=\(scopes.joined(separator: " "))") }
        if let resource { parts.append("resource=\(resource)") }
        return parts.isEmpty ? "session" : parts.joined(separator: ", ")
    }

    /// `validation_failed` unless each scope is a valid `scope-token` (RFC 6749 §3.3) and the
    /// resource an absolute URI without a fragment (RFC 8707 §2).
    public func validate() throws(AuthGateError) {
        var fields: [FieldError] = []
        let scopeCharacters = { (c: Unicode.Scalar) in c == "!" || (c >= "#" && c <= "[") || (c >= "]" && c <= "~") }
        if scopes.contains(where: { $0.isEmpty || $0.count > 256 || !$0.unicodeScalars.allSatisfy(scopeCharacters) }) {
            fields.append(FieldError(field: "scopes", message: "each scope must be 1–256 printable ASCII characters without spaces, quotes or backslashes"))
        }
        if let resource {
            let url = URL(string: resource)
            if resource.count > 2048 || url?.scheme == nil || url?.host == nil || url?.fragment != nil {
                fields.append(FieldError(field: "resource", message: "must be an absolute URI without a fragment, like https://api.example.com"))
            }
        }
        if !fields.isEmpty { throw .validationFailed(fields) }
    }
}
