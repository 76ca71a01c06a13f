import AuthGateCore
import AuthGateHTTP
import FoundationEssentials

/// Pushed authorization requests (RFC 9126): the parameters go to the provider over the
/// back channel, and the browser's URL carries only `client_id` and the `request_uri` it
/// answered (§4).
enum PushedAuthorization {
    /// Reads the answer of a PAR endpoint (§2.2) strictly.
    /// - Returns: The `request_uri`.
    static func parse(_ response: HTTPResponse, provider: String) throws(AuthGateError) -> String {
        let what = "pushed authorization response"
        guard let object = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw ProviderFailure.malformed(provider, what: what, "it is not a JSON object")
        }
        // It goes into the browser's URL: short, printable, and a URI (§2.2).
        guard case .string(let requestURI) = object["request_uri"], !requestURI.isEmpty, requestURI.utf8.count <= 2048,
            requestURI.contains(":"), requestURI.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else {
            throw ProviderFailure.malformed(provider, what: what, "request_uri is missing or not a URI")
        }
        guard case .number(let expiresIn) = object["expires_in"], expiresIn > 0 else {
            throw ProviderFailure.malformed(provider, what: what, "expires_in is missing or not a positive number")
        }
        return requestURI
    }
}
