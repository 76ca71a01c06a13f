package import AuthGateCore

/// `authgate provider add`'s answers as typed (flags, or a terminal's answers to
/// ``askForMissing(_:)``): which go together, the questions for those not given, and the
/// ``ProviderFileDraft`` they make. Usage errors are ``ToolFailure/usageError(_:)``s.
package struct ProviderFileAnswers: Equatable {
    package var preset: String?
    package var host: String?
    package var tenant: String?
    package var realm: String?
    package var authorizationServer: String?
    package var issuer: String?
    package var clientID: String?
    package var clientSecretFile: String?
    /// `--register`, with its `--initial-access-token-file` and `--private-key-jwt`.
    package var register: Bool
    package var initialAccessTokenFile: String?
    package var privateKeyJWT: Bool
    package var grants: [String]
    package var scopes: [String]
    package var caFile: String?
    package var deviceEndpoint: String?
    package var revocationEndpoint: String?
    package var credentialHosts: [String]
    package var storage: String?

    package init(
        preset: String? = nil,
        host: String? = nil,
        tenant: String? = nil,
        realm: String? = nil,
        authorizationServer: String? = nil,
        issuer: String? = nil,
        clientID: String? = nil,
        clientSecretFile: String? = nil,
        register: Bool = false,
        initialAccessTokenFile: String? = nil,
        privateKeyJWT: Bool = false,
        grants: [String] = [],
        scopes: [String] = [],
        caFile: String? = nil,
        deviceEndpoint: String? = nil,
        revocationEndpoint: String? = nil,
        credentialHosts: [String] = [],
        storage: String? = nil
    ) {
        self.preset = preset
        self.host = host
        self.tenant = tenant
        self.realm = realm
        self.authorizationServer = authorizationServer
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecretFile = clientSecretFile
        self.register = register
        self.initialAccessTokenFile = initialAccessTokenFile
        self.privateKeyJWT = privateKeyJWT
        self.grants = grants
        self.scopes = scopes
        self.caFile = caFile
        self.deviceEndpoint = deviceEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.credentialHosts = credentialHosts
        self.storage = storage
    }

    /// `--register`'s options: its two options only with it, and with it an issuer and no
    /// client id or secret (the provider assigns them).
    package func checkRegistration() throws(ToolFailure) {
        guard register else {
            if initialAccessTokenFile != nil || privateKeyJWT {
                throw .usageError("--initial-access-token-file and --private-key-jwt go with --register.")
            }
            return
        }
        guard issuer != nil else { throw .usageError("--register needs --issuer: the registration endpoint is read from its discovery document.") }
        guard clientID == nil, clientSecretFile == nil else {
            throw .usageError("--register obtains the client id (and secret) from the provider: leave out --client-id and --client-secret-file.")
        }
    }

    /// `--register`'s options for ``ProviderFileChange/add(_:registration:dryRun:)``; `nil`
    /// without it.
    package var registration: ProviderFileChange.Registration? {
        register ? ProviderFileChange.Registration(privateKeyJWT: privateKeyJWT, initialAccessTokenFile: initialAccessTokenFile) : nil
    }

    /// Asks `ask` (a question on the terminal: the line typed, `nil` at the end of input) for
    /// the answers not given: the issuer or a preset, the client id, the storage and, without a
    /// preset (which fills them), the grants and the scopes. An empty answer leaves the field
    /// out.
    package mutating func askForMissing(_ ask: (String) -> String?) {
        func answer(_ prompt: String) -> String? {
            let answer = ask(prompt)?.trimming(while: \.isWhitespace) ?? ""
            return answer.isEmpty ? nil : answer
        }
        if preset == nil, issuer == nil, let answer = answer("Issuer URL, or a preset (\(ProviderPreset.allCases.map(\.rawValue).joined(separator: ", "))): ") {
            if ProviderPreset(rawValue: answer) != nil { preset = answer } else { issuer = answer }
        }
        if clientID == nil { clientID = answer("Client id registered at the provider: ") }
        if storage == nil, let answer = answer("Sessions in \(Self.storageChoices) [memory]: ") {
            storage = answer.lowercased().hasPrefix("p") ? "persistent" : answer.lowercased().hasPrefix("m") ? "memory" : answer
        }
        guard preset == nil else { return }
        if grants.isEmpty, let answer = answer("Grants, separated by spaces (password, device_code, authorization_code, client_credentials): ") {
            grants = answer.split(separator: " ").map(String.init)
        }
        if scopes.isEmpty, let answer = answer("Scopes, separated by spaces (e.g. openid profile email): ") {
            scopes = answer.split(separator: " ").map(String.init)
        }
    }

    /// What each storage means, as the question says it.
    package static let storageChoices =
        "memory (kept across a restart or an upgrade of the daemon, signed out at a stop or a reboot) or persistent (sealed on disk, kept across reboots)"

    /// The file these answers make, with `schema` as its `"$schema"`; a preset, grant or
    /// storage that is none of its kind's names is a usage error listing them.
    package func draft(schema: String?) throws(ToolFailure) -> ProviderFileDraft {
        var draft = ProviderFileDraft()
        draft.schema = schema
        draft.preset = try preset.map { value throws(ToolFailure) in try Self.choice(value, as: ProviderPreset.self, option: "--preset") }
        for (option, value) in [("host", host), ("tenant", tenant), ("realm", realm), ("authorization_server", authorizationServer)] {
            if let value { draft.presetOptions[option] = value }
        }
        draft.issuer = issuer
        draft.clientID = clientID
        draft.clientSecretFile = clientSecretFile
        draft.grants = try grants.map { value throws(ToolFailure) in try Self.choice(value, as: Grant.self, option: "--grant") }
        draft.scopes = scopes
        draft.caFile = caFile
        draft.storage = try storage.map { value throws(ToolFailure) in
            try Self.choice(value, as: ProviderConfiguration.Storage.self, option: "--storage")
        }
        draft.deviceEndpoint = deviceEndpoint
        draft.revocationEndpoint = revocationEndpoint
        draft.credentialHosts = credentialHosts
        return draft
    }

    /// `value` as one of `T`'s cases, else a usage error naming them.
    static func choice<T: RawRepresentable<String> & CaseIterable>(_ value: String, as: T.Type, option: String) throws(ToolFailure) -> T {
        guard let choice = T(rawValue: value) else {
            throw .usageError("\(option) must be one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(Terminal.safe(value))\".")
        }
        return choice
    }
}
