import AuthGateCore
import Foundation
import Testing

@testable import AuthGateOAuth

/// Where a provider's two metadata documents are and how they combine (MetadataDocuments).
@Suite("Provider metadata: OpenID discovery and RFC 8414")
struct ProviderMetadataTests {
    @Test(
        "OpenID discovery appends its well-known path to the issuer; RFC 8414 §3.1 inserts its own between the host and the issuer's path, a terminating / removed",
        arguments: [
            (
                "https://sso.example.com", "https://sso.example.com/.well-known/openid-configuration",
                "https://sso.example.com/.well-known/oauth-authorization-server"
            ),
            (
                "https://sso.example.com/", "https://sso.example.com/.well-known/openid-configuration",
                "https://sso.example.com/.well-known/oauth-authorization-server"
            ),
            (
                "https://sso.example.com:8443/realms/corp/", "https://sso.example.com:8443/realms/corp/.well-known/openid-configuration",
                "https://sso.example.com:8443/.well-known/oauth-authorization-server/realms/corp"
            ),
        ]
    )
    func documentURLs(issuer: String, openID: String, authorizationServer: String) {
        #expect(MetadataDocuments.openIDConfigurationURL(issuer: issuer)?.absoluteString == openID)
        #expect(MetadataDocuments.authorizationServerMetadataURL(issuer: issuer)?.absoluteString == authorizationServer)
    }

    @Test("the RFC 8414 document adds what discovery does not name; discovery wins where both do; one naming another issuer is not used")
    func merging() throws {
        let openID: [String: JSONValue] = [
            "issuer": .string("https://sso.example.com"), "token_endpoint": .string("https://sso.example.com/token"),
            "jwks_uri": .string("https://sso.example.com/jwks"),
        ]
        let rfc8414: [String: JSONValue] = [
            "issuer": .string("https://sso.example.com"), "token_endpoint": .string("https://elsewhere.example.com/token"),
            "revocation_endpoint": .string("https://sso.example.com/revoke"),
        ]
        let merged = try ProviderMetadata.discovered(MetadataDocuments.merged(openID: openID, authorizationServer: rfc8414), overrides: .init())
        #expect(merged.revocationEndpoint?.absoluteString == "https://sso.example.com/revoke")
        #expect(merged.tokenEndpoint.absoluteString == "https://sso.example.com/token")
        var another = rfc8414
        another["issuer"] = .string("https://evil.example.com")
        #expect(MetadataDocuments.merged(openID: openID, authorizationServer: another) == openID)
        #expect(MetadataDocuments.merged(openID: openID, authorizationServer: nil) == openID)
    }
}
