import AuthGateCore
import AuthGateHTTP
import Synchronization

/// A provider's DPoP nonce (RFC 9449 §8): the last one it sent, put into every later proof to
/// it. One per provider, shared by all of its sessions.
final class DPoPNonce: Sendable {
    private let value = Mutex<String?>(nil)

    var current: String? { value.withLock { $0 } }

    func remember(_ nonce: String) {
        value.withLock { $0 = nonce }
    }

    /// The nonce of a `use_dpop_nonce` answer (RFC 9449 §8: HTTP 400 with that error and a
    /// `DPoP-Nonce` header), or `nil` for any other answer or an unusable nonce.
    static func challenge(in response: HTTPResponse) -> String? {
        guard response.status == 400 || response.status == 401, let nonce = response.headers["dpop-nonce"], DPoPKey.isValidNonce(nonce),
            OAuthErrorResponse(response)?.error == "use_dpop_nonce" || response.headers["www-authenticate"]?.contains("use_dpop_nonce") == true
        else { return nil }
        return nonce
    }
}
