import AuthGateCore
import AuthGateServer
import Synchronization

/// At most ``maximumPerUser`` sign-ins, registrations, interactive starts and userinfo calls
/// of one bounded uid (see ``PeerCredentials/isUnbounded``) at providers at once: the provider
/// HTTP pool has 16 threads, and one user's requests to a slow provider must not hold them all.
/// A call beyond the share is refused at once (`rate_limited`), not queued.
///
/// Revocations (a logout's, a replaced session's) take turns instead: one at a time per bounded
/// uid, the others waiting in its line, since the session is gone whatever the provider says and
/// its refresh token must still be revoked; a uid that ends a thousand sessions at once holds one
/// thread of the pool, not all of them.
final class ProviderRequestShare: Sendable {
    static let maximumPerUser = 4
    /// Revocations of one uid that may wait for its turn; beyond, one is not made (and said so).
    static let maximumRevocationsWaiting = 256

    private let inFlight = Mutex<[UInt32: Int]>([:])
    private let revocations = TurnsPerUser(maximumWaiting: ProviderRequestShare.maximumRevocationsWaiting)

    /// Runs `revoke` in the caller's turn; `nil` (not run) when too many of its revocations wait.
    func revoking<Result: Sendable>(for caller: PeerCredentials, _ revoke: () async -> Result) async -> Result? {
        guard !caller.isUnbounded else { return await revoke() }
        guard await revocations.take(caller.uid) else { return nil }
        defer { revocations.give(caller.uid) }
        return await revoke()
    }

    /// Runs `body` inside the caller's share.
    func run<Result>(for caller: PeerCredentials, _ body: () async throws(AuthGateError) -> Result) async throws(AuthGateError) -> Result {
        guard !caller.isUnbounded else { return try await body() }
        let admitted = inFlight.withLock { counts in
            guard counts[caller.uid, default: 0] < Self.maximumPerUser else { return false }
            counts[caller.uid, default: 0] += 1
            return true
        }
        guard admitted else {
            throw AuthGateError(
                .rateLimited,
                "You have \(Self.maximumPerUser) requests at providers in flight already; try again when one has ended.",
                retryAfterSeconds: 1
            )
        }
        defer {
            inFlight.withLock { counts in
                let left = counts[caller.uid, default: 1] - 1
                counts[caller.uid] = left > 0 ? left : nil
            }
        }
        return try await body()
    }
}
