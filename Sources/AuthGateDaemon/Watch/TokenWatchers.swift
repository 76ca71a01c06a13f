import AuthGateCore
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Synchronization

/// The `token.watch` subscriptions, by session. ``SessionTable`` tells it of every change of a
/// session's access token (a refresh, a new sign-in) and of every end (signed out, refused),
/// in the actor step that makes the change; each is encoded once and written to every watcher
/// of that session.
///
/// Every notification asks the provider's current `access` again (``ProviderAccess``): a
/// watcher a reload no longer admits gets `session.ended` with `access_revoked`, and its
/// connection is closed. So does a watcher the user was never asked about once the session
/// asks before a program gets its token (a reload set `access.confirm`, or the user signed in
/// again with `--confirm`): a cached token never reaches an unconfirmed program, and a client
/// that watches again is asked.
final class TokenWatchers: Sendable {
    /// Watches one bounded uid may hold (root and the daemon's own user are not bound).
    static let maximumPerUser = 64

    private struct Watch {
        var sink: WatchSink
        var caller: PeerCredentials
        /// The session's token changed since the watch began or since ``waitForChange(_:watch:)`` last returned.
        var changed = false
        /// A `wait_for_sign_in` watch waiting for the session's first token.
        var waiter: CheckedContinuation<Bool, Never>?
        /// The user allowed this watcher when it began (the session asked then).
        var consented = false
    }

    private struct State {
        var bySession: [SessionKey: [UInt64: Watch]] = [:]
        var countByUID: [UInt32: Int] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())
    private let access: ProviderAccess?
    private let asksConsent: @Sendable (SessionKey) -> Bool

    /// - Parameters:
    ///   - access: Who may use which provider now; `nil` admits every watcher (tests).
    ///   - asksConsent: Whether the session asks before a program gets its token now.
    init(access: ProviderAccess? = nil, asksConsent: @escaping @Sendable (SessionKey) -> Bool = { _ in false }) {
        self.access = access
        self.asksConsent = asksConsent
    }

    /// The user allowed the watcher `id` of `key` (the session asked when the watch began).
    func consented(_ key: SessionKey, id: UInt64) {
        state.withLock { $0.bySession[key]?[id]?.consented = true }
    }

    /// Adds a watch of `key` by `caller`; it ends with ``remove(_:id:)`` (when its connection closes).
    /// - Throws: `rate_limited` when a bounded uid holds its most.
    func add(_ key: SessionKey, sink: WatchSink, caller: PeerCredentials, bounded: Bool) throws(AuthGateError) -> UInt64 {
        let id = state.withLock { state -> UInt64? in
            if bounded, state.countByUID[key.uid, default: 0] >= Self.maximumPerUser { return nil }
            let id = state.nextID
            state.nextID += 1
            state.bySession[key, default: [:]][id] = Watch(sink: sink, caller: caller)
            state.countByUID[key.uid, default: 0] += 1
            return id
        }
        guard let id else {
            throw AuthGateError(.rateLimited, "You have \(Self.maximumPerUser) token watches open, the most one user may; close some first.")
        }
        return id
    }

    func remove(_ key: SessionKey, id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let removed = state.bySession[key]?.removeValue(forKey: id) else { return nil }
            if state.bySession[key]?.isEmpty == true { state.bySession[key] = nil }
            let left = state.countByUID[key.uid, default: 1] - 1
            state.countByUID[key.uid] = left > 0 ? left : nil
            return removed.waiter
        }
        waiter?.resume(returning: false)
    }

    /// Waits until the token of `key` changes (a sign-in), for the watch `id` that found no
    /// session. Returns at once if it changed since the watch began (or since the last wait);
    /// `false` when the watch ended instead (its connection closed) or the task was cancelled.
    func waitForChange(_ key: SessionKey, watch id: UInt64) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let answer = state.withLock { state -> Bool? in
                    guard let watch = state.bySession[key]?[id], !Task.isCancelled else { return false }
                    if watch.changed {
                        state.bySession[key]?[id]?.changed = false
                        return true
                    }
                    state.bySession[key]?[id]?.waiter = continuation
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                defer { state.bySession[key]?[id]?.waiter = nil }
                return state.bySession[key]?[id]?.waiter
            }
            waiter?.resume(returning: false)
        }
    }

    /// The session's access token changed: `token.changed` to its watchers.
    func tokensChanged(_ key: SessionKey, _ tokens: TokenSet) {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            guard let watches = state.bySession[key] else { return [] }
            var waiters: [CheckedContinuation<Bool, Never>] = []
            for (id, watch) in watches {
                if let waiter = watch.waiter {
                    waiters.append(waiter)
                    state.bySession[key]?[id]?.waiter = nil
                } else {
                    state.bySession[key]?[id]?.changed = true
                }
            }
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: true) }
        let sinks = admittedWatchers(of: key)
        guard !sinks.isEmpty else { return }
        let change = TokenChanged(
            provider: key.provider.rawValue,
            session: key.name.rawValue,
            accessToken: tokens.accessToken,
            tokenType: tokens.tokenType,
            expiresAt: tokens.expiresAt,
            scopes: tokens.scopes
        )
        send(RPCNotification(method: TokenChanged.method, params: change), accessToken: tokens.accessToken.exposedValue, to: sinks)
    }

    /// The session ended: `session.ended` to its watchers, who go on watching for a new sign-in
    /// — except after `access_revoked`, which ends their watches and closes their connections.
    func sessionEnded(_ key: SessionKey, _ reason: SessionEnded.Reason, message: String) {
        if reason == .accessRevoked {
            revoke(key, removing: Array(state.withLock { $0.bySession[key] ?? [:] }.keys), message: message)
            return
        }
        let sinks = admittedWatchers(of: key)
        guard !sinks.isEmpty else { return }
        let ended = SessionEnded(provider: key.provider.rawValue, session: key.name.rawValue, reason: reason, message: message)
        send(RPCNotification(method: SessionEnded.method, params: ended), accessToken: nil, to: sinks)
    }

    /// The sinks of the watchers of `key` that the provider's access admits now and that the
    /// user allowed if the session asks; the others' watches end.
    private func admittedWatchers(of key: SessionKey) -> [WatchSink] {
        let watches = state.withLock { $0.bySession[key] ?? [:] }
        let asks = asksConsent(key)
        var admitted: [WatchSink] = []
        var refused: [UInt64] = []
        var unasked: [UInt64] = []
        for (id, watch) in watches {
            if let access, !access.admits(watch.caller, to: key.provider.rawValue) {
                refused.append(id)
            } else if asks, !watch.consented {
                unasked.append(id)
            } else {
                admitted.append(watch.sink)
            }
        }
        if !refused.isEmpty {
            revoke(
                key,
                removing: refused,
                message: "You may no longer use the provider '\(key.provider)': an administrator narrowed its access."
            )
        }
        if !unasked.isEmpty {
            revoke(
                key,
                removing: unasked,
                message: "The session now asks you before a program gets its token; watch it again to be asked."
            )
        }
        return admitted
    }

    /// Ends the watches `ids` of `key`: `session.ended` with `access_revoked`, then their
    /// connections close.
    private func revoke(_ key: SessionKey, removing ids: [UInt64], message: String) {
        let sinks = state.withLock { state in ids.compactMap { state.bySession[key]?[$0]?.sink } }
        for id in ids { remove(key, id: id) }
        let ended = SessionEnded(provider: key.provider.rawValue, session: key.name.rawValue, reason: .accessRevoked, message: message)
        guard let line = Self.line(RPCNotification(method: SessionEnded.method, params: ended)) else { return }
        for sink in sinks { sink.sendLast(line) }
    }

    private func send<Params>(_ notification: RPCNotification<Params>, accessToken: String?, to sinks: [WatchSink]) {
        guard let line = Self.line(notification) else { return }
        for sink in sinks { sink.send(line, accessToken: accessToken) }
    }

    private static func line<Params>(_ notification: RPCNotification<Params>) -> [UInt8]? {
        guard let encoded = try? RPCCoding.makeEncoder().encode(notification) else { return nil }
        return Array(encoded) + [UInt8(ascii: "\n")]
    }
}
