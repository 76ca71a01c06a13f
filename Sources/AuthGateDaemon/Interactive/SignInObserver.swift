import AuthGateCore

/// Told of every sign-in's end, for the metrics (``DaemonMetrics`` observes it): the
/// interactive flows' here, and the method handlers' password, client-credentials and
/// registration sign-ins.
protocol SignInObserver: Sendable {
    func signIn(provider: ProviderID, grant: Grant, outcome: ErrorReason?)
}
