import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import Synchronization

/// The `token.watch` subscriptions, by session. ``SessionTable`` tells it of every change of a
/// session's access token (a refresh, a new sign-in) and of every end (signed out, refused),
/// in the actor step that makes the change; each is encoded once and written to every watcher
/// of that session.
final class TokenWatchers: Sendable {
    /// Watches one bounded uid may hold (root and the daemon's own user are not bound).
    static let maximumPerUser = 64

    private struct State {
        var bySession: [SessionKey: [UInt64: WatchSink]] = [:]
        var countByUID: [UInt32: Int] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Adds a watch of `key`; it ends with ``remove(_:id:)`` (when its connection closes).
    /// - Throws: `rate_limited` when a bounded uid holds its most.
    func add(_ key: SessionKey, sink: WatchSink, bounded: Bool) throws(AuthGateError) -> UInt64 {
        let id = state.withLock { state -> UInt64? in
            if bounded, state.countByUID[key.uid, default: 0] >= Self.maximumPerUser { return nil }
            let id = state.nextID
            state.nextID += 1
            state.bySession[key, default: [:]][id] = sink
            state.countByUID[key.uid, default: 0] += 1
            return id
        }
        guard let id else {
            throw AuthGateError(.rateLimited, "You have \(Self.maximumPerUser) token watches open, the most one user may; close some first.")
        }
        return id
    }

    func remove(_ key: SessionKey, id: UInt64) {
        state.withLock { state in
            guard state.bySession[key]?.removeValue(forKey: id) != nil else { return }
            if state.bySession[key]?.isEmpty == true { state.bySession[key] = nil }
            let left = state.countByUID[key.uid, default: 1] - 1
            state.countByUID[key.uid] = left > 0 ? left : nil
        }
    }

    /// The session's access token changed: `token.changed` to its watchers.
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) {
        let sinks = watchers(of: key)
        guard !sinks.isEmpty else { return }
        let change = TokenChanged(provider: key.provider.rawValue, session: key.name.rawValue, accessToken: tokens.accessToken,
                                  tokenType: tokens.tokenType, expiresAt: tokens.expiresAt, scopes: tokens.scopes)
        send(RPCNotification(method: TokenChanged.method, params: change), accessToken: tokens.accessToken.exposedValue, to: sinks)
    }

    /// The session ended: `session.ended` to its watchers, who go on watching for a new sign-in.
    func sessionEnded(_ key: SessionKey, _ reason: SessionEnded.Reason, message: String) {
        let sinks = watchers(of: key)
        guard !sinks.isEmpty else { return }
        let ended = SessionEnded(provider: key.provider.rawValue, session: key.name.rawValue, reason: reason, message: message)
        send(RPCNotification(method: SessionEnded.method, params: ended), accessToken: nil, to: sinks)
    }

    private func watchers(of key: SessionKey) -> [WatchSink] {
        state.withLock { Array(($0.bySession[key] ?? [:]).values) }
    }

    private func send<Params>(_ notification: RPCNotification<Params>, accessToken: String?, to sinks: [WatchSink]) {
        guard let encoded = try? RPCCoding.makeEncoder().encode(notification) else { return }
        let line = Array(encoded) + [UInt8(ascii: "\n")]
        for sink in sinks { sink.send(line, accessToken: accessToken) }
    }
}
