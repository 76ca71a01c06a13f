import AuthGateCore

/// The client-credentials sign-ins the daemon makes when a session of a service's provider
/// (``ProviderConfiguration/signsInAsClient``) is first asked for a token: one at a time per
/// session, and the callers that ask meanwhile wait for that one instead of signing in again.
///
/// A sign-in runs in a task of its own, so that a caller who hangs up does not end it for the
/// others waiting; it is bounded by the provider's timeouts, and ends with the last request
/// waiting for it only in that sense.
actor FirstUseSignIns {
    private var running: [SessionKey: Task<Result<Void, AuthGateError>, Never>] = [:]

    /// Runs `signIn` for `key`, or waits for the one running.
    func signIn(_ key: SessionKey, _ signIn: @escaping @Sendable () async -> Result<Void, AuthGateError>) async throws(AuthGateError) {
        let task: Task<Result<Void, AuthGateError>, Never>
        if let existing = running[key] {
            task = existing
        } else {
            task = Task { await signIn() }
            running[key] = task
        }
        let outcome = await task.value
        if running[key] == task { running[key] = nil }
        try outcome.get()
    }
}
