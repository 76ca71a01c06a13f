import AuthGateCore
import AuthGateRPC

// The registry and the reloader speak in domain values; the handlers turn them into what the
// RPC answers, here.

extension ProviderInfo {
    /// What `providers.list` says of a provider.
    init(_ provider: RegisteredProvider) {
        let configuration = provider.configuration
        self.init(
            id: provider.id,
            displayName: configuration?.displayName ?? provider.id,
            type: configuration?.kind.rawValue,
            status: provider.status,
            statusReason: provider.statusReason,
            grants: configuration?.grants ?? [],
            registration: configuration.map { configuration in
                switch configuration.settings {
                case .mock(let mock): mock.allowRegistration
                // OpenID Connect "Initiating User Registration": the browser flow with prompt=create.
                case .oidc(let remote): remote.grants.contains(.authorizationCode)
                case .oauth2: false
                }
            } ?? false,
            storage: configuration?.storage.rawValue,
            credentialHelper: configuration?.credentialHelper.map {
                ProviderInfo.CredentialHelperInfo(
                    hosts: $0.hosts,
                    username: $0.username,
                    tools: $0.tools,
                    paths: $0.paths.isEmpty ? nil : $0.paths,
                    authtype: $0.authType == .basic ? nil : $0.authType.rawValue
                )
            }
        )
    }
}

extension ProviderReloadReport {
    /// What `config.reload` says of one provider's change.
    init(_ change: ProviderRegistry.Change) {
        let report = change.current?.report ?? change.previous?.report
        self.init(
            id: change.id,
            file: report?.file ?? "",
            change: change.kind,
            status: change.current?.status,
            statusReason: change.current?.statusReason,
            problems: report?.problems.map(\.description) ?? [],
            warnings: report?.warnings.map(\.description) ?? []
        )
    }
}
