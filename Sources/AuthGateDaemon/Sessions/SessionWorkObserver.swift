import AuthGateCore

/// What the session manager tells as it happens, for the metrics (``DaemonMetrics`` observes
/// it): refreshes started and ended, and the writes of the sessions files.
protocol SessionWorkObserver: Sendable {
    /// A background refresh started `seconds` after its planned time.
    func refreshStarted(lateBy seconds: Double)
    /// A refresh of a session's own token (background or a caller's) has ended.
    func refreshEnded(provider: ProviderID, outcome: ErrorReason?)
    /// A write of a uid's sealed sessions file.
    func storeWrite(succeeded: Bool, duration: Duration)
}
