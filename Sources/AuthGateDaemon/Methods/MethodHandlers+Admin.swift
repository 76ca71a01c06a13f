import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// The administrators' methods: `config.reload`, `provider.discover`, `metrics` and
/// `storage.rekey` (``requireAdmin(_:)``).
extension MethodHandlers {
    /// Admins only: reads `providers.d` again and answers with the per-provider report.
    func configReload() async throws(AuthGateError) -> [ProviderReloadReport] {
        try requireAdmin("reload the providers")
        services.logger.notice("reload requested", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        return try await services.reloader.reload().map(ProviderReloadReport.init)
    }

    /// Administrators only: an issuer's discovery document, fetched here (the CLI links no
    /// HTTP client), with the checks a provider's validation makes.
    func providerDiscover(_ params: ProviderDiscoverParams) async throws(AuthGateError) -> ProviderOffer {
        try requireAdmin("run discovery for a new provider")
        let caBundle = try readCABundle(params.caFile)
        let metadata = try await ProviderDiscovery.discover(issuer: params.issuer, caBundle: caBundle)
        return ProviderOffer(
            issuer: params.issuer,
            tokenEndpoint: metadata.tokenEndpoint.absoluteString,
            authorizationEndpoint: metadata.authorizationEndpoint?.absoluteString,
            deviceAuthorizationEndpoint: metadata.deviceAuthorizationEndpoint?.absoluteString,
            pushedAuthorizationRequestEndpoint: metadata.pushedAuthorizationRequestEndpoint?.absoluteString,
            requirePushedAuthorizationRequests: metadata.requirePushedAuthorizationRequests,
            registrationEndpoint: metadata.registrationEndpoint?.absoluteString,
            grantTypes: metadata.grantTypesSupported,
            grants: Grant.allCases.filter { metadata.grantTypesSupported?.contains($0.wireName) ?? true },
            codeChallengeMethods: metadata.codeChallengeMethodsSupported,
            dpopSigningAlgs: metadata.dpopSigningAlgValuesSupported,
            tokenEndpointAuthMethods: metadata.tokenEndpointAuthMethodsSupported,
            scopes: metadata.scopesSupported,
            revocationEndpoint: metadata.revocationEndpoint?.absoluteString
        )
    }

    /// Administrators only: the metrics as Prometheus's text exposition.
    func metrics() async throws(AuthGateError) -> MetricsResult {
        try requireAdmin("read the metrics")
        guard let exposition = services.exposition else { throw AuthGateError(.methodNotFound, "This daemon keeps no metrics (it runs with --no-metrics).") }
        return MetricsResult(contentType: MetricsExposition.contentType, text: await exposition.text())
    }

    /// Administrators only: every sessions file sealed again under a new storage key, which
    /// then replaces the old one where it lives (``SessionPersistence/rekey()``).
    func storageRekey() async throws(AuthGateError) -> StorageRekeyResult {
        try requireAdmin("change the storage key")
        guard let persistence = services.persistence else { throw AuthGateError(.storageUnavailable, "This daemon has no session store.") }
        services.logger.notice("rekey requested", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        // Child processes, fsyncs and the store's lock: off the event loops and the actors' threads.
        let outcome: Result<SessionPersistence.RekeyOutcome, StorageError>
        do {
            outcome = try await NIOThreadPool.singleton.runIfActive { () -> Result<SessionPersistence.RekeyOutcome, StorageError> in
                do throws(StorageError) { return .success(try persistence.rekey()) } catch { return .failure(error) }
            }
        } catch {
            throw AuthGateError(.serviceUnavailable, "authgated is stopping.")
        }
        switch outcome {
        case .success(let done):
            return StorageRekeyResult(
                storageKey: done.location.kind,
                files: done.report.files,
                sessions: done.report.sessions,
                unreadableFiles: done.report.unreadable.count
            )
        case .failure(let failure):
            services.logger.error("rekey failed: \(failure)")
            throw AuthGateError(.storageUnavailable, failure.message)
        }
    }
}
