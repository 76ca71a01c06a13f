import AuthGateCore

/// The client-credentials sign-ins the daemon makes when a session of a service's provider
/// (``ProviderConfiguration/signsInAsClient``) is first asked for a token: one at a time per
/// session, and the callers that ask meanwhile wait for that one instead of signing in again.
///
/// A caller learns the session is missing before it gets here, and the sign-in another caller
/// ran may have ended in between: each sign-in therefore first asks `isSignedIn`, and one that
/// finds the session there does nothing (the caller then reads the token that sign-in stored).
///
/// A sign-in runs in a task of its own, so that a caller who hangs up does not end it for the
/// others waiting; it is bounded by the provider's timeouts, and ends with the last request
/// waiting for it only in that sense.
actor FirstUseSignIns {
    private var running: [SessionKey: Task<Result<Void, AuthGateError>, Never>] = [:]

    /// Runs `signIn` for `key` unless `isSignedIn` says it is no longer needed, or waits for the
    /// one running.
    func signIn(
        _ key: SessionKey,
        isSignedIn: @escaping @Sendable () async -> Bool,
        _ signIn: @escaping @Sendable () async -> Result<Void, AuthGateError>
    ) async throws(AuthGateError) {
        let task: Task<Result<Void, AuthGateError>, Never>
        if let existing = running[key] {
            task = existing
        } else {
            task = Task {
                if await isSignedIn() { return .success(()) }
                return await signIn()
            }
            running[key] = task
        }
        let outcome = await task.value
        if running[key] == task { running[key] = nil }
        try outcome.get()
    }
}
