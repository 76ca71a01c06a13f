package import AuthGateRPC

/// What `authgate logout` tells the person: that the session is gone, and whether the provider
/// revoked its tokens (RFC 7009) or they were only forgotten here and stay valid at the
/// provider until they expire.
package enum SignOutSentence {
    /// - Parameters:
    ///   - result: The daemon's `logout` answer.
    ///   - provider: The provider's id, as the person typed it.
    package static func text(_ result: LogoutResult, provider: String) -> String {
        let name = Terminal.safe(provider)
        guard result.removed else { return "You had no session with \(name); nothing to do." }
        guard let revocation = result.revocation else { return "Signed out of \(name); the session held no tokens to revoke." }
        let forgotten = "the tokens were only forgotten here"
        switch revocation.status {
        case .revoked:
            return "Signed out of \(name): the provider revoked the tokens."
        case .notOffered:
            return "Signed out of \(name): \(forgotten) (the provider has no revocation endpoint) and stay valid until they expire."
        case .refused, .failed:
            let why = revocation.message.map { " (\(Terminal.safe($0)))" } ?? ""
            return "Signed out of \(name): \(forgotten), as the provider did not revoke them\(why); they stay valid until they expire."
        case .unknown:
            return "Signed out of \(name): the tokens were forgotten here; the provider does not say whether it revoked them."
        }
    }
}
