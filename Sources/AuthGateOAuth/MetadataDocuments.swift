import AuthGateCore
import AuthGateHTTP
import FoundationEssentials

/// The two documents in which a provider publishes its endpoints, and how they combine: the
/// OpenID Provider Configuration (OpenID Connect Discovery 1.0 §4) and the OAuth 2.0
/// Authorization Server Metadata (RFC 8414 §3). Some providers name an endpoint in one only
/// (a `revocation_endpoint` in the RFC 8414 document alone is common), so both are read.
enum MetadataDocuments {
    /// OpenID Connect Discovery 1.0 §4.1: the issuer (without a terminating `/`) followed by
    /// `/.well-known/openid-configuration`.
    static func openIDConfigurationURL(issuer: String) -> URL? {
        URL(string: withoutTrailingSlash(issuer) + "/.well-known/openid-configuration")
    }

    /// RFC 8414 §3.1: `/.well-known/oauth-authorization-server` inserted between the issuer's
    /// host (and port) and its path, the path's terminating `/` removed first:
    /// `https://host/tenant/x` → `https://host/.well-known/oauth-authorization-server/tenant/x`.
    static func authorizationServerMetadataURL(issuer: String) -> URL? {
        let trimmed = withoutTrailingSlash(issuer)
        guard let schemeEnd = trimmed.firstRange(of: "://") else { return nil }
        let pathStart = trimmed[schemeEnd.upperBound...].firstIndex(of: "/") ?? trimmed.endIndex
        return URL(string: String(trimmed[..<pathStart]) + "/.well-known/oauth-authorization-server" + String(trimmed[pathStart...]))
    }

    /// The OpenID document with what only the RFC 8414 document says added: where both name a
    /// member, the OpenID one is kept. An RFC 8414 document naming another issuer than the
    /// OpenID one is not used (RFC 8414 §3.3: it must be the issuer it was asked of).
    static func merged(openID: [String: JSONValue], authorizationServer: [String: JSONValue]?) -> [String: JSONValue] {
        guard let authorizationServer, let issuer = openID["issuer"]?.stringValue, authorizationServer["issuer"]?.stringValue == issuer else {
            return openID
        }
        return openID.merging(authorizationServer) { fromOpenID, _ in fromOpenID }
    }

    /// The RFC 8414 document, or `nil` when there is none or it cannot be used: it only adds to
    /// the OpenID document, so its absence (most OpenID providers answer 404) is no failure.
    static func authorizationServerMetadata(
        issuer: String,
        transport: any HTTPTransport,
        policy: HTTPRequestPolicy
    ) async -> [String: JSONValue]? {
        guard let url = authorizationServerMetadataURL(issuer: issuer) else { return nil }
        let request = HTTPRequest(method: .get, url: url, endpoint: .serverMetadata, headers: [("Accept", "application/json")])
        guard let response = try? await transport.send(request, policy: policy), response.status == 200 else { return nil }
        return (try? JSONValue.parse(Data(response.body)))?.objectValue
    }

    private static func withoutTrailingSlash(_ issuer: String) -> String {
        issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
    }
}
