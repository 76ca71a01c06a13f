import AuthGateCore
import Logging

/// A session's identity: whose, at which provider, under which name.
///
/// The uid comes from the socket's peer credentials, so one uid never reaches another's
/// sessions whatever it sends.
struct SessionKey: Sendable, Hashable, Comparable {
    var uid: UInt32
    var provider: ProviderID
    var name: SessionName

    static func < (lhs: SessionKey, rhs: SessionKey) -> Bool {
        (lhs.uid, lhs.provider, lhs.name) < (rhs.uid, rhs.provider, rhs.name)
    }
}

extension SessionKey {
    /// The key as log metadata (never a token: the session's name, not its contents), with `extra`.
    func logMetadata(_ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        extra.merging(["peer.uid": "\(uid)", "provider.id": "\(provider)", "session": "\(name)"]) { mine, _ in mine }
    }
}
