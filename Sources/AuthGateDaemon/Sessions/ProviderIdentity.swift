import AuthGateCore
import FoundationEssentials

/// Who issued a session's tokens: a session is only kept (across a reload or a restart) by a
/// provider with the same issuer and client.
struct ProviderIdentity: Sendable, Hashable {
    var issuer: String?
    var clientID: String?

    init(issuer: String?, clientID: String?) {
        self.issuer = issuer
        self.clientID = clientID
    }

    init(_ configuration: ProviderConfiguration) {
        switch configuration.settings {
        case .oidc(let remote), .oauth2(let remote):
            self.init(issuer: remote.issuer?.absoluteString ?? remote.endpoints.token?.absoluteString, clientID: remote.clientID)
        case .mock:
            self.init(issuer: nil, clientID: nil)
        }
    }
}
