import AuthGateCore
import AuthGateHTTP
import FoundationEssentials

/// Turns what went wrong on the way to a provider into an error a user can act on.
enum ProviderFailure {
    /// No HTTP response at all.
    static func transport(_ error: HTTPTransportError, provider: String) -> AuthGateError {
        switch error.kind {
        case .cannotConnect:
            AuthGateError(.networkError, "Cannot reach \(provider): \(error.message).")
        case .tls:
            AuthGateError(.networkError, "Cannot reach \(provider) securely: \(error.message).")
        case .timedOut:
            AuthGateError(.serviceUnavailable, "\(provider) did not answer in time.")
        case .responseTooLarge:
            AuthGateError(.serverError, "\(provider) sent an oversized response (\(error.message)).")
        case .forbiddenURL:
            AuthGateError(.serverError, "\(provider) points to a URL authgate will not use: \(error.message).")
        case .other:
            AuthGateError(.networkError, "The exchange with \(provider) failed: \(error.message).")
        }
    }

    /// An HTTP response that is not the success we needed and not an OAuth error either.
    static func unexpected(_ response: HTTPResponse, provider: String, what: String) -> AuthGateError {
        if response.status >= 500 || response.status == 429 {
            return AuthGateError(
                .serviceUnavailable,
                "\(provider) is unavailable: it answered HTTP \(response.status) to the \(what).",
                retryAfterSeconds: response.retryAfterSeconds
            )
        }
        return AuthGateError(.serverError, "\(provider) answered the \(what) with HTTP \(response.status)\(describe(response)).")
    }

    /// A well-formed status with a body we cannot use.
    static func malformed(_ provider: String, what: String, _ detail: String) -> AuthGateError {
        AuthGateError(.serverError, "\(provider) sent a malformed \(what): \(detail).")
    }

    /// "with an HTML page", "with an empty body", … — never the body itself, which may hold secrets.
    static func describe(_ response: HTTPResponse) -> String {
        let type = response.headers["content-type"]?.lowercased() ?? ""
        if response.body.isEmpty { return " and an empty body" }
        if type.contains("html") { return " and an HTML page" }
        if type.contains("json") { return " and a JSON body" }
        return " and a \(type.isEmpty ? "body of unknown type" : "\(type) body")"
    }

    /// An `error_description` fit to show: printable, short.
    static func sanitize(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        let printable = String(String.UnicodeScalarView(text.unicodeScalars.filter { !$0.isUnsafeControl }.prefix(200)))
        return printable.isEmpty ? nil : printable
    }
}

/// An RFC 6749 §5.2 error response.
struct OAuthErrorResponse: Sendable {
    var error: String
    var description: String?

    /// Reads one from a 4xx JSON body; `nil` when the body is not one.
    /// - Parameter acceptingHTTP200: Also from a 200 body with `error` and no `access_token`
    ///   (`token_errors_with_http_200`).
    init?(_ response: HTTPResponse, acceptingHTTP200: Bool = false) {
        guard (400..<500).contains(response.status) || acceptingHTTP200 && response.status == 200,
            let object = (try? JSONValue.parse(Data(response.body)))?.objectValue,
            let error = object["error"]?.stringValue, !error.isEmpty,
            response.status != 200 || object["access_token"] == nil
        else { return nil }
        self.error = error
        description = ProviderFailure.sanitize(object["error_description"]?.stringValue)
    }

    /// " (the provider says: …)" or "".
    var detail: String { description.map { " (the provider says: \($0))" } ?? "" }
}
