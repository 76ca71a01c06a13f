import AuthGateCore

/// The most sessions a bounded uid may hold (see ``PeerCredentials/isUnbounded``), counting the
/// new sessions whose sign-ins are under way, so that sign-ins made at once cannot together
/// pass it. Replacing a session is always allowed.
///
/// A value the ``SessionManager`` actor owns; the sessions held are the manager's to count.
struct SessionRoom {
    /// `authgated --max-sessions-per-user`.
    let maximumPerUser: Int
    /// New sessions whose sign-ins are under way, per uid, with how many sign-ins each.
    private var reserved: [UInt32: [SessionKey: Int]] = [:]

    init(maximumPerUser: Int) {
        self.maximumPerUser = maximumPerUser
    }

    /// Throws `rate_limited` when `key` is a new session (`exists` is false) of a uid that holds
    /// `held` sessions and, with those under way, its most already.
    func ensure(for key: SessionKey, exists: Bool, held: Int) throws(AuthGateError) {
        guard !exists, reserved[key.uid]?[key] == nil, held + (reserved[key.uid]?.count ?? 0) >= maximumPerUser else { return }
        throw AuthGateError(.rateLimited, "You have \(maximumPerUser) sessions, the most one user may hold; sign out of some (authgate logout) first.")
    }

    /// ``ensure(for:exists:held:)``, and the room held for a new `key` until ``release(_:)``.
    mutating func reserve(for key: SessionKey, exists: Bool, held: Int) throws(AuthGateError) {
        try ensure(for: key, exists: exists, held: held)
        guard !exists else { return }
        reserved[key.uid, default: [:]][key, default: 0] += 1
    }

    /// The sign-in that reserved room for `key` ended (its session stored, or not).
    mutating func release(_ key: SessionKey) {
        guard let count = reserved[key.uid]?[key] else { return }
        reserved[key.uid]?[key] = count > 1 ? count - 1 : nil
        if reserved[key.uid]?.isEmpty == true { reserved[key.uid] = nil }
    }
}
