public import FoundationEssentials

/// Reads `providers.d`: every `*.json` file becomes one provider, valid or not.
///
/// Checking is strict (unknown keys, wrong types, missing fields, non-https URLs and bad ids
/// are problems) and complete (every problem of a file is reported, each with its JSON path).
/// One bad file never affects the others. Files and a directory that others could have
/// written are refused (``FileTrust``).
public enum ProviderConfigurationLoader {
    /// Files larger than this are refused unread.
    public static let maximumFileSize = 1 << 20

    /// Loads every `*.json` file of `directory`, sorted by name.
    /// - Throws: ``ProvidersDirectoryError`` when the directory cannot be listed.
    public static func load(directory: String) throws(ProvidersDirectoryError) -> [ProviderFileReport] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            let exists = FileManager.default.fileExists(atPath: directory)
            throw ProvidersDirectoryError(path: directory, detail: exists ? "cannot be read" : "no such directory")
        }
        if let problem = FileTrust.problem(with: directory, as: .providersDirectory) {
            throw ProvidersDirectoryError(path: directory, detail: "refused: \(problem)")
        }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        let reports = names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted().map { name in
            load(file: base + name)
        }
        return refusingSharedCredentialHosts(reports)
    }

    /// A host the credential helpers serve belongs to one provider, or each of its path
    /// prefixes (`credential_helper.paths`) does: a later file (by name) claiming a host an
    /// earlier one claims for every path, or a prefix of it an earlier one claims, is invalid,
    /// and the error names both files. Providers with different prefixes on one host, and one
    /// without `paths` beside them, share it (``CredentialHost/select(host:path:tool:among:)``).
    public static func refusingSharedCredentialHosts(_ reports: [ProviderFileReport]) -> [ProviderFileReport] {
        var owners: [String: String] = [:]
        return reports.map { report in
            guard let helper = report.configuration?.credentialHelper else { return report }
            // Hosts as the helpers match them: `git.example.com:443` is `git.example.com`.
            let hosts = helper.hosts.map { host in
                let normalized = CredentialHost.normalize(host) ?? host
                return normalized.hasSuffix(":443") ? String(normalized.dropLast(4)) : normalized
            }
            let claims = hosts.flatMap { host in helper.paths.isEmpty ? [host] : helper.paths.map { "\(host)/\($0)" } }
            if let claim = claims.first(where: { owners[$0] != nil }), let owner = owners[claim] {
                return invalid(
                    report.id,
                    report.file,
                    helper.paths.isEmpty ? "$.credential_helper.hosts" : "$.credential_helper.paths",
                    helper.paths.isEmpty
                        ? "\(claim) is claimed by \(owner) too; a host belongs to one provider"
                        : "\(claim) is claimed by \(owner) too; a host's path prefix belongs to one provider"
                )
            }
            for claim in claims { owners[claim] = report.file }
            return report
        }
    }

    /// Loads one provider file; its stem is the provider id.
    public static func load(file: String) -> ProviderFileReport {
        let name = file.split(separator: "/").last.map(String.init) ?? file
        let id = String(name.dropLast(name.hasSuffix(".json") ? 5 : 0))
        // Checked on the descriptor it is read from (FileTrust.read): never checked by path and
        // then reopened.
        switch FileTrust.read(file, as: .providerFile, maximumSize: maximumFileSize) {
        case .success(let bytes):
            return parse(Data(bytes), id: id, file: file)
        case .failure(let problem):
            return invalid(id, file, "$", problem.refused ? "refused: \(problem)" : "\(problem)")
        }
    }

    /// Checks one provider document.
    /// - Parameters:
    ///   - data: The file's bytes.
    ///   - id: The provider id (the file's stem).
    ///   - file: The file's name for messages.
    public static func parse(_ data: Data, id: String, file: String) -> ProviderFileReport {
        check(data, id: id, file: file).report
    }

    /// The keys the loader accepts in each object of a provider document, by JSON path with
    /// array indices as `[]` (`$`, `$.tls`, `$.users[]`): only the objects `data` has are
    /// read, and the root's keys depend on its `type`. For docs/provider.schema.json's test.
    public static func acceptedKeys(in data: Data) -> [String: Set<String>] {
        check(data, id: "keys", file: "keys.json").problems.acceptedKeys
    }

    private static func check(_ data: Data, id: String, file: String) -> (report: ProviderFileReport, problems: ProblemCollector) {
        let problems = ProblemCollector(file: file)
        let providerID = ProviderID(id)
        if providerID == nil {
            problems.add("$", "the file name must be ID.json where ID matches [a-z0-9][a-z0-9_-]* (at most 64 characters), found \"\(id)\"")
        }
        let document: JSONValue
        do {
            document = try JSONValue.parse(data)
        } catch {
            problems.add("$", "not valid JSON: \(error.detail)")
            return (ProviderFileReport(id: id, file: file, outcome: .invalid(problems.problems), warnings: []), problems)
        }
        var warnings: [ConfigProblem] = []
        let settings = ProviderDocument.read(ProviderPreset.expand(document, problems: problems), problems: problems, warnings: &warnings, fileName: file)
        guard let providerID, let settings, problems.problems.isEmpty else {
            return (ProviderFileReport(id: id, file: file, outcome: .invalid(problems.problems), warnings: warnings), problems)
        }
        let configuration = ProviderConfiguration(
            id: providerID,
            file: file,
            displayName: settings.displayName ?? id,
            storage: settings.storage,
            refresh: settings.refresh,
            access: settings.access,
            scopes: settings.scopes,
            settings: settings.settings,
            credentialHelper: settings.credentialHelper
        )
        return (ProviderFileReport(id: id, file: file, outcome: .valid(configuration), warnings: warnings), problems)
    }

    static func invalid(_ id: String, _ file: String, _ path: String, _ message: String) -> ProviderFileReport {
        ProviderFileReport(id: id, file: file, outcome: .invalid([ConfigProblem(file: file, path: path, message: message)]), warnings: [])
    }
}

/// The walk over one provider document.
struct ProviderDocument {
    var displayName: String?
    var storage: ProviderConfiguration.Storage
    var refresh: RefreshPolicy
    var access: AccessRules
    var scopes: [String]
    var settings: ProviderConfiguration.Settings
    var credentialHelper: ProviderConfiguration.CredentialHelper?

    static let commonKeys: Set<String> = ["$schema", "type", "display_name", "storage", "refresh", "access", "scopes", "credential_helper"]
    static let remoteKeys: Set<String> = commonKeys.union([
        "issuer", "endpoints", "client_id", "client_secret_file", "client_auth", "grants", "audience",
        "redirect_uri", "tls", "timeouts", "allow_insecure_http_loopback", "client_key_file", "client_key_id", "dpop", "par",
        "token_exchange",
    ]).union(ProviderQuirks.keys).union(ProviderPreset.keys).union(WorkloadIdentity.keys)
    static let mockKeys: Set<String> = commonKeys.union([
        "users", "latency_ms", "access_token_lifetime_seconds", "refresh_token_lifetime_seconds",
        "allow_registration", "password_policy",
    ])

    static func read(_ document: JSONValue, problems: ProblemCollector, warnings: inout [ConfigProblem], fileName: String) -> ProviderDocument? {
        guard let root = ObjectReader(document, path: "$", problems: problems) else { return nil }
        let kind = root.choice("type", as: ProviderConfiguration.Kind.self, required: true)
        switch kind {
        case .oidc, .oauth2: root.rejectUnknownKeys(allowed: remoteKeys, context: "a provider of type \"\(kind!.rawValue)\"")
        case .mock: root.rejectUnknownKeys(allowed: mockKeys, context: "a provider of type \"mock\"")
        case nil: root.rejectUnknownKeys(allowed: remoteKeys.union(mockKeys), context: "a provider")
        }

        _ = root.string("$schema")  // for editors (docs/provider.schema.json); not read
        let displayName = root.string("display_name")
        let storage = root.choice("storage", as: ProviderConfiguration.Storage.self) ?? .memory
        let refresh = readRefresh(root)
        let access = readAccess(root)
        let scopes = readScopes(root)
        let credentialHelper = readCredentialHelper(root)

        let settings: ProviderConfiguration.Settings?
        switch kind {
        case .oidc: settings = readRemote(root, isOIDC: true, problems: problems).map { .oidc($0) }
        case .oauth2: settings = readRemote(root, isOIDC: false, problems: problems).map { .oauth2($0) }
        case .mock: settings = readMock(root, problems: problems).map { .mock($0) }
        case nil: settings = nil
        }
        if case .oidc(let remote) = settings, !remote.grants.isEmpty, !scopes.contains("openid") {
            warnings.append(
                ConfigProblem(file: fileName, path: "$.scopes", message: "an OpenID Connect provider usually needs the \"openid\" scope to issue an ID token")
            )
        }
        if let remote = settings.flatMap(\.remote), remote.grants.contains(.password) {
            warnings.append(
                ConfigProblem(
                    file: fileName,
                    path: "$.grants",
                    message:
                        "the password grant is deprecated by the OAuth 2.0 Security Best Current Practice (RFC 9700 §2.4); prefer device_code or authorization_code"
                )
            )
        }
        guard let settings else { return nil }
        return ProviderDocument(
            displayName: displayName,
            storage: storage,
            refresh: refresh,
            access: access,
            scopes: scopes,
            settings: settings,
            credentialHelper: credentialHelper
        )
    }

    /// `credential_helper`: `{"hosts": ["git.example.com", "registry.example.com:5000"], "username": "oauth2", "tools": ["git", "docker"],
    /// "paths": ["org-a/"], "authtype": "basic"}`.
    private static func readCredentialHelper(_ root: ObjectReader) -> ProviderConfiguration.CredentialHelper? {
        guard let helper = root.object("credential_helper") else { return nil }
        helper.rejectUnknownKeys(allowed: ["hosts", "username", "tools", "paths", "authtype"], context: "credential_helper")
        var tools = ProviderConfiguration.CredentialHelper.allTools
        if let named = helper.stringArray("tools") {
            for (index, tool) in named.enumerated() where !tools.contains(tool) {
                helper.add("tools[\(index)]", "must be \"git\" or \"docker\", found \"\(tool.prefix(100))\"")
            }
            if named.isEmpty { helper.add("tools", "must name at least one of \"git\" and \"docker\" (leave it out for both)") }
            tools = tools.filter(named.contains)
        }
        var hosts: [String] = []
        for (index, host) in (helper.stringArray("hosts") ?? []).enumerated() {
            if let normalized = CredentialHost.normalize(host) {
                hosts.append(normalized)
            } else {
                helper.add("hosts[\(index)]", "must be a host name or address with an optional :port, without a scheme or path, found \"\(host.prefix(100))\"")
            }
        }
        if hosts.isEmpty, helper.stringArray("hosts") == nil { helper.add("hosts", "is required: the hosts the credential helpers serve") }
        let username = helper.string("username") ?? "oauth2"
        if username.isEmpty || username.count > 256 || username.containsControlCharacters || username.contains(":") {
            helper.add("username", "must be 1–256 printable characters without a colon")
        }
        var paths: [String] = []
        if let named = helper.stringArray("paths") {
            for (index, path) in named.enumerated() {
                if let prefix = CredentialHost.pathPrefix(path) {
                    if !paths.contains(prefix) { paths.append(prefix) }
                } else {
                    helper.add(
                        "paths[\(index)]",
                        "must be a path prefix on the hosts such as \"org-a/\": segments without spaces, ?, # or .., found \"\(path.prefix(100))\""
                    )
                }
            }
            if named.isEmpty { helper.add("paths", "must name at least one path prefix (leave it out for every path)") }
        }
        let authType = helper.choice("authtype", as: ProviderConfiguration.CredentialHelper.AuthType.self) ?? .basic
        return ProviderConfiguration.CredentialHelper(hosts: hosts, username: username, tools: tools, paths: paths, authType: authType)
    }

    private static func readRefresh(_ root: ObjectReader) -> RefreshPolicy {
        var policy = RefreshPolicy()
        guard let refresh = root.object("refresh") else { return policy }
        refresh.rejectUnknownKeys(allowed: ["before_expiry_seconds", "max_backoff_seconds", "first_use_spread_seconds"], context: "refresh")
        policy.beforeExpirySeconds = refresh.integer("before_expiry_seconds", in: 0...86_400) ?? policy.beforeExpirySeconds
        policy.maxBackoffSeconds = refresh.integer("max_backoff_seconds", in: 1...86_400) ?? policy.maxBackoffSeconds
        policy.firstUseSpreadSeconds = refresh.integer("first_use_spread_seconds", in: 0...300) ?? policy.firstUseSpreadSeconds
        return policy
    }

    private static func readAccess(_ root: ObjectReader) -> AccessRules {
        guard let access = root.object("access") else { return AccessRules() }
        access.rejectUnknownKeys(allowed: ["users", "groups", "executables", "confirm"], context: "access")
        let executables = access.stringArray("executables")
        for (index, path) in (executables ?? []).enumerated() where !path.hasPrefix("/") {
            access.add("executables[\(index)]", "must be an absolute path, found \"\(path)\"")
        }
        return AccessRules(
            users: access.stringArray("users"),
            groups: access.stringArray("groups"),
            executables: executables,
            confirm: access.bool("confirm") ?? false
        )
    }

    private static func readScopes(_ root: ObjectReader) -> [String] {
        let scopes = root.stringArray("scopes") ?? []
        for (index, scope) in scopes.enumerated() where scope.contains(where: { $0 == " " || $0 == "\"" || $0 == "\\" || !$0.isASCII }) {
            // RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
            root.add("scopes[\(index)]", "a scope is one token of printable ASCII without spaces, quotes or backslashes, found \"\(scope)\"")
        }
        return scopes
    }

    static func describe(_ value: JSONValue) -> String {
        if case .string(let string) = value { "\"\(string)\"" } else { value.typeName }
    }

    private static func readMock(_ root: ObjectReader, problems: ProblemCollector) -> MockProviderSettings? {
        var settings = MockProviderSettings()
        var seen: Set<String> = []
        settings.users =
            root.array("users") { item, path -> MockProviderSettings.User? in
                guard let user = ObjectReader(item, path: path, problems: problems) else { return nil }
                user.rejectUnknownKeys(allowed: ["username", "password", "email", "display_name"], context: "a mock user")
                let username = user.string("username", required: "the user's login name")
                let password = user.string("password", required: "the user's password")
                let email = user.string("email")
                if let email, !EmailAddress.isPlausible(email) {
                    user.add("email", "must be an email address like name@example.com")
                }
                guard let username, let password else { return nil }
                guard seen.insert(username.lowercased()).inserted else {
                    user.add("username", "duplicate user \"\(username)\"")
                    return nil
                }
                return .init(username: username, password: Secret(password), email: email, displayName: user.string("display_name"))
            } ?? []
        if let latency = root.raw("latency_ms") {
            let range = root.array("latency_ms") { item, path in
                ObjectReader.integer(item, path: path, in: 0...60_000, problems: problems)
            }
            if let range, range.count == 2, range[0] <= range[1] {
                settings.latencyMilliseconds = range[0]...range[1]
            } else if case .array = latency {
                root.add("latency_ms", "expected [min, max] in milliseconds with min <= max")
            }
        }
        settings.accessTokenLifetimeSeconds = root.integer("access_token_lifetime_seconds", in: 1...31_536_000) ?? settings.accessTokenLifetimeSeconds
        settings.refreshTokenLifetimeSeconds = root.integer("refresh_token_lifetime_seconds", in: 1...31_536_000) ?? settings.refreshTokenLifetimeSeconds
        settings.allowRegistration = root.bool("allow_registration") ?? settings.allowRegistration
        if let policy = root.object("password_policy") {
            settings.passwordPolicy = PasswordPolicy.read(policy)
        }
        return settings
    }
}
