public import AuthGateCore
public import AuthGateHTTP
import FoundationEssentials

/// Discovery of an issuer no provider file names yet: what `authgate provider add --issuer`
/// shows an administrator before a file is written (`provider.discover`).
public enum ProviderDiscovery {
    /// Fetches and checks `issuer`'s OpenID Provider Configuration (OpenID Connect Discovery 1.0
    /// §4), with what only its RFC 8414 metadata names added (``MetadataDocuments``), with the
    /// checks a provider's validation makes: the document names this very issuer and every
    /// endpoint is https.
    /// - Parameter caBundle: PEM CAs to trust instead of the system's (a file's `tls.ca_file`).
    /// - Throws: `validation_failed` for an issuer that is not an https URL or a document for
    ///   another issuer; `network_error`, `service_unavailable`, `server_error` as for any provider.
    public static func discover(
        issuer: String,
        caBundle: [UInt8]?,
        transport: any HTTPTransport = CurlTransport()
    ) async throws(AuthGateError) -> ProviderMetadata {
        guard let url = URL(string: issuer), url.scheme?.lowercased() == "https", url.host?.isEmpty == false,
            url.query == nil, url.fragment == nil
        else {
            throw refused("must be an https URL without query or fragment")
        }
        guard let documentURL = MetadataDocuments.openIDConfigurationURL(issuer: issuer) else {
            throw refused("must be an https URL without query or fragment")
        }
        let policy = HTTPRequestPolicy(caBundle: caBundle)
        let name = url.host ?? issuer
        async let authorizationServer = MetadataDocuments.authorizationServerMetadata(issuer: issuer, transport: transport, policy: policy)
        let response: HTTPResponse
        do {
            response = try await transport.send(
                HTTPRequest(method: .get, url: documentURL, endpoint: .discovery, headers: [("Accept", "application/json")]),
                policy: policy
            )
        } catch {
            throw ProviderFailure.transport(error, provider: name)
        }
        guard response.status == 200 else {
            throw ProviderFailure.unexpected(response, provider: name, what: "discovery document")
        }
        guard let openID = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw ProviderFailure.malformed(name, what: "discovery document", "it is not a JSON object")
        }
        let document = MetadataDocuments.merged(openID: openID, authorizationServer: await authorizationServer)
        let metadata: ProviderMetadata
        do {
            metadata = try ProviderMetadata.discovered(document, overrides: .init())
        } catch {
            throw ProviderFailure.malformed(name, what: "discovery document", error.message)
        }
        guard metadata.issuer == issuer else {
            throw refused("is not the issuer the discovery document names (\"\(String((metadata.issuer ?? "").prefix(200)))\")")
        }
        for endpoint in metadata.allEndpoints + [metadata.registrationEndpoint].compactMap({ $0 }) where !policy.allows(endpoint) {
            throw refused("has a discovery document pointing to \(endpoint.absoluteString.prefix(200)), which is not https")
        }
        return metadata
    }

    private static func refused(_ message: String) -> AuthGateError {
        .validationFailed([FieldError(field: "issuer", message: message)])
    }
}
