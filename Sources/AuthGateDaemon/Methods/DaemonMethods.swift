import AuthGateCore
import AuthGateRPC
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon shows of itself: `providers.list` and `daemon.info`.
struct DaemonMethods: Sendable {
    let registry: ProviderRegistry
    let sessions: SessionManager
    let context: DaemonContext
    let admin: AdminCheck
    /// The cached path's answers, counted for an administrator's `daemon.info`.
    let published: PublishedTokens
    /// Whether the HTTP metrics listener serves; `nil` where there is none.
    var metricsListener: MetricsListenerStatus?
    /// The session store and its key; `nil` in tests that run without one.
    var persistence: SessionPersistence?

    func providersList(from caller: MethodCaller) async -> [ProviderInfo] {
        await registry.visible(to: caller.credentials).map(ProviderInfo.init)
    }

    func daemonInfo(from caller: MethodCaller) async -> DaemonInfo {
        let isAdmin = admin.admits(caller)
        let uptime = ContinuousClock.now - context.startedAt
        return DaemonInfo(
            version: AuthGateVersion.current,
            uptimeSeconds: Int(uptime.components.seconds),
            providers: await registry.visible(to: caller.credentials).count,
            sessions: await sessions.count(uid: isAdmin ? nil : caller.uid),
            configDir: context.configDirectory,
            mode: context.mode.rawValue,
            socket: context.socketPath,
            daemonUID: UInt32(geteuid()),
            daemonGID: UInt32(getegid()),
            cachedTokenAnswers: isAdmin ? published.answerCount : nil,
            refresh: isAdmin ? RefreshStatistics(await sessions.refreshStatistics()) : nil,
            metricsListener: isAdmin
                ? metricsListener?.current.map { MetricsListenerInfo(address: $0.address, serving: $0.serving, error: $0.problem) } : nil,
            storageKey: persistence?.keyLocation?.kind
        )
    }
}
