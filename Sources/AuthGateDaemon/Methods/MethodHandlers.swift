import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// The RPC methods, for one caller. Each returns a result or throws ``AuthGateError``.
struct MethodHandlers {
    let services: DaemonServices
    let caller: PeerCredentials
    /// The connection, for `token.watch`; `nil` where there is none (in-process callers).
    var watchSink: WatchSink?

    func providersList() async -> [ProviderInfo] {
        await services.registry.visible(to: caller).map(ProviderInfo.init)
    }

    func daemonInfo() async -> DaemonInfo {
        let isAdmin = services.context.servesAdmin && AccessPolicy().isAdmin(caller, adminGroup: services.context.adminGroup)
        let uptime = ContinuousClock.now - services.context.startedAt
        return DaemonInfo(
            version: AuthGateVersion.current,
            uptimeSeconds: Int(uptime.components.seconds),
            providers: await services.registry.visible(to: caller).count,
            sessions: await services.sessions.count(uid: isAdmin ? nil : caller.uid),
            configDir: services.context.configDirectory,
            mode: services.context.mode.rawValue,
            socket: services.context.socketPath,
            daemonUID: UInt32(geteuid()),
            daemonGID: UInt32(getegid()),
            cachedTokenAnswers: isAdmin ? services.broadcast.published.answerCount : nil,
            refresh: isAdmin ? RefreshStatistics(await services.sessions.refreshStatistics()) : nil,
            metricsListener: isAdmin
                ? services.metricsListener?.current.map { MetricsListenerInfo(address: $0.address, serving: $0.serving, error: $0.problem) } : nil,
            storageKey: services.persistence?.keyLocation?.kind
        )
    }

    /// The provider the caller names, if the caller may use it, and the caller's session key there.
    func resolve(_ provider: String, _ session: String?) async throws(AuthGateError) -> (ProviderConfiguration, any IdentityProvider, SessionKey) {
        let (configuration, client) = try await services.registry.usableProvider(provider, for: caller)
        return (configuration, client, try sessionKey(configuration.id, session))
    }

    func sessionKey(_ provider: ProviderID, _ session: String?) throws(AuthGateError) -> SessionKey {
        guard let name = session.map(SessionName.init) ?? .default else {
            throw .validationFailed([FieldError(field: "session", message: "must be 1–64 characters of letters, digits, '.', '_' or '-'")])
        }
        return SessionKey(uid: caller.uid, provider: provider, name: name)
    }

    func metadata(_ key: SessionKey, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        key.logMetadata(extra.merging(["peer.pid": "\(caller.pid)"]) { mine, _ in mine })
    }
}
