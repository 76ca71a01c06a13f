import AuthGateCore
import FoundationEssentials

/// One poll of the token endpoint with a device code (RFC 8628 §3.4, §3.5).
enum DevicePoll: Sendable {
    /// `authorization_pending`: the user has not finished yet.
    case pending
    /// `slow_down`: poll less often (5 more seconds, §3.5).
    case slowDown
    /// The user approved: the tokens, and who signed in.
    case signedIn(SignInResult)
}

/// The device authorization grant (RFC 8628): the form fields of its two requests.
enum DeviceAuthorizationGrant {
    /// The grant type of the token request (§3.4).
    static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    /// The device authorization request (§3.1); the client authenticates as at the token endpoint.
    static func authorizationFields(scopes: [String], audience: String?) -> [(String, String)] {
        var fields: [(String, String)] = []
        if !scopes.isEmpty { fields.append(("scope", scopes.joined(separator: " "))) }
        if let audience { fields.append(("audience", audience)) }
        return fields
    }

    /// The device access token request (§3.4).
    static func tokenFields(_ deviceCode: Secret) -> [(String, String)] {
        [("grant_type", grantType), ("device_code", deviceCode.exposedValue)]
    }

    /// Reads a device authorization response (§3.2) strictly.
    static func parse(_ object: [String: JSONValue], provider: String, now: Date) throws(AuthGateError) -> DeviceAuthorization {
        let what = "device authorization response"
        func string(_ key: String) throws(AuthGateError) -> String {
            guard let value = object[key]?.stringValue, !value.isEmpty else {
                throw ProviderFailure.malformed(provider, what: what, "\(key) is missing or not a string")
            }
            return value
        }
        func url(_ key: String) throws(AuthGateError) -> URL? {
            guard let text = object[key]?.stringValue else { return nil }
            // Shown on the user's terminal: refused, not percent-encoded, when it holds controls.
            guard !text.containsControlCharacters, text.utf8.count <= 2048, let url = URL(string: text), url.scheme == "https" || url.scheme == "http",
                url.host != nil
            else {
                throw ProviderFailure.malformed(provider, what: what, "\(key) is not a URL")
            }
            return url
        }
        let deviceCode = try string("device_code")
        let userCode = try string("user_code")
        // The user reads it off the terminal and types it in: a short, printable code, never
        // escape sequences for the terminal that shows it.
        guard userCode.count <= 64, !userCode.containsControlCharacters else {
            throw ProviderFailure.malformed(provider, what: what, "user_code is over 64 characters or holds control characters")
        }
        // `verification_url` is the name of a draft of RFC 8628 that some servers still send.
        let verificationURI = try url("verification_uri")
        let draftVerificationURL = try url("verification_url")
        guard let verificationURI = verificationURI ?? draftVerificationURL else {
            throw ProviderFailure.malformed(provider, what: what, "verification_uri is missing")
        }
        guard case .number(let expiresIn) = object["expires_in"], expiresIn > 0 else {
            throw ProviderFailure.malformed(provider, what: what, "expires_in is missing or not a positive number")
        }
        var interval = 5
        // As the server asks (RFC 8628 §3.5 forbids polling faster), rounded up; clamped before
        // the conversion, which would trap on an absurd value such as 1e300.
        if case .number(let seconds) = object["interval"], seconds >= 1 { interval = Int(min(seconds.rounded(.up), 3600)) }
        return DeviceAuthorization(
            deviceCode: Secret(deviceCode),
            userCode: userCode,
            verificationURI: verificationURI,
            verificationURIComplete: try url("verification_uri_complete"),
            expiresAt: now.addingTimeInterval(expiresIn),
            interval: interval
        )
    }
}
