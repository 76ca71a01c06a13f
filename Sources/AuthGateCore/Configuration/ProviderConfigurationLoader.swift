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
            let claims = helper.hosts.flatMap { host in helper.paths.isEmpty ? [host] : helper.paths.map { "\(host)/\($0)" } }
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
private struct ProviderDocument {
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
        refresh.rejectUnknownKeys(allowed: ["before_expiry_seconds", "max_backoff_seconds"], context: "refresh")
        policy.beforeExpirySeconds = refresh.integer("before_expiry_seconds", in: 0...86_400) ?? policy.beforeExpirySeconds
        policy.maxBackoffSeconds = refresh.integer("max_backoff_seconds", in: 1...86_400) ?? policy.maxBackoffSeconds
        return policy
    }

    private static func readAccess(_ root: ObjectReader) -> AccessRules {
        guard let access = root.object("access") else { return AccessRules() }
        access.rejectUnknownKeys(allowed: ["users", "groups", "executables"], context: "access")
        let executables = access.stringArray("executables")
        for (index, path) in (executables ?? []).enumerated() where !path.hasPrefix("/") {
            access.add("executables[\(index)]", "must be an absolute path, found \"\(path)\"")
        }
        return AccessRules(users: access.stringArray("users"), groups: access.stringArray("groups"), executables: executables)
    }

    /// `token_exchange`: the audiences and token types `token.exchange` may ask for.
    private static func readTokenExchange(_ root: ObjectReader) -> TokenExchangePolicy {
        var policy = TokenExchangePolicy()
        guard let exchange = root.object("token_exchange") else { return policy }
        exchange.rejectUnknownKeys(allowed: ["audiences", "requested_token_types"], context: "token_exchange")
        if let audiences = exchange.stringArray("audiences") {
            for (index, audience) in audiences.enumerated() where audience.isEmpty || audience.utf8.count > 2048 || audience.containsControlCharacters {
                exchange.add("audiences[\(index)]", "must be 1–2048 printable characters")
            }
            policy.audiences = audiences
        }
        if let types = exchange.stringArray("requested_token_types") {
            let allowed = TokenExchangePolicy.issuableTypes.map { "\"\($0)\"" }.joined(separator: ", ")
            for (index, type) in types.enumerated() where !TokenExchangePolicy.issuableTypes.contains(type) {
                exchange.add(
                    "requested_token_types[\(index)]",
                    "must be one of \(allowed) (a refresh token is never handed out), found \"\(type.prefix(100))\""
                )
            }
            policy.requestedTokenTypes = types.filter(TokenExchangePolicy.issuableTypes.contains)
        }
        return policy
    }

    private static func readScopes(_ root: ObjectReader) -> [String] {
        let scopes = root.stringArray("scopes") ?? []
        for (index, scope) in scopes.enumerated() where scope.contains(where: { $0 == " " || $0 == "\"" || $0 == "\\" || !$0.isASCII }) {
            // RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
            root.add("scopes[\(index)]", "a scope is one token of printable ASCII without spaces, quotes or backslashes, found \"\(scope)\"")
        }
        return scopes
    }

    private static func readRemote(_ root: ObjectReader, isOIDC: Bool, problems: ProblemCollector) -> RemoteProviderSettings? {
        let insecureLoopback = root.bool("allow_insecure_http_loopback") ?? false
        func url(_ reader: ObjectReader, _ key: String, required: String? = nil) -> URL? {
            guard let string = reader.string(key, required: required) else { return nil }
            return checkedURL(string, path: reader.childPath(key), allowLoopbackHTTP: insecureLoopback, problems: problems)
        }

        let issuer = url(root, "issuer", required: isOIDC ? "the issuer URL (discovery starts from it)" : nil)
        var endpoints = RemoteProviderSettings.Endpoints()
        if let reader = root.object("endpoints") {
            reader.rejectUnknownKeys(allowed: ["token", "authorization", "device_authorization", "revocation", "userinfo", "jwks"], context: "endpoints")
            endpoints = .init(
                token: url(reader, "token"),
                authorization: url(reader, "authorization"),
                deviceAuthorization: url(reader, "device_authorization"),
                revocation: url(reader, "revocation"),
                userinfo: url(reader, "userinfo"),
                jwks: url(reader, "jwks")
            )
        }
        if !isOIDC {
            switch root.raw("endpoints") {
            case nil: root.missing("endpoints", "an object with at least the token endpoint (an oauth2 provider has no discovery)")
            case .object(let object) where object["token"] == nil: problems.add("$.endpoints.token", "required: the token endpoint's https URL")
            default: break  // present, or its type was already reported
            }
        }

        let clientID = root.string("client_id", required: "the OAuth client id registered at the provider")
        let secretFile = root.string("client_secret_file")
        let clientKeyFile = root.string("client_key_file")
        for (key, path) in [("client_secret_file", secretFile), ("client_key_file", clientKeyFile)] {
            if let path, !path.hasPrefix("/") { root.add(key, "must be an absolute path, found \"\(path)\"") }
        }
        let clientKeyID = root.string("client_key_id")
        if let clientKeyID, clientKeyID.isEmpty || clientKeyID.utf8.count > 256 || clientKeyID.containsControlCharacters {
            root.add("client_key_id", "must be 1–256 printable characters")
        }
        var tlsCertificate: String?
        var tlsKey: String?
        var caFile: String?
        if let tls = root.object("tls") {
            tls.rejectUnknownKeys(allowed: ["ca_file", "client_cert_file", "client_key_file"], context: "tls")
            caFile = tls.string("ca_file")
            tlsCertificate = tls.string("client_cert_file")
            tlsKey = tls.string("client_key_file")
            for (key, path) in [("ca_file", caFile), ("client_cert_file", tlsCertificate), ("client_key_file", tlsKey)] {
                if let path, !path.hasPrefix("/") { tls.add(key, "must be an absolute path, found \"\(path)\"") }
            }
            if (tlsCertificate == nil) != (tlsKey == nil) {
                tls.add(
                    tlsCertificate == nil ? "client_cert_file" : "client_key_file",
                    "required with tls.\(tlsCertificate == nil ? "client_key_file" : "client_cert_file"): mutual TLS needs both"
                )
            }
        }
        let defaultAuth: ClientAuthentication =
            secretFile != nil
            ? .clientSecretBasic : clientKeyFile != nil ? .privateKeyJWT : root.contains("client_assertion_file") ? .clientAssertionFile : .none
        let clientAuth = root.choice("client_auth", as: ClientAuthentication.self) ?? defaultAuth
        if clientAuth.needsSecret, secretFile == nil, root.contains("client_auth") {
            root.add("client_secret_file", "required when client_auth is \"\(clientAuth.rawValue)\"")
        }
        if clientAuth == .privateKeyJWT, clientKeyFile == nil {
            root.add("client_key_file", "required when client_auth is \"private_key_jwt\": the client's private key (PEM, EC P-256 or RSA)")
        }
        if clientAuth.isMutualTLS, tlsCertificate == nil {
            root.add("tls", "client_cert_file and client_key_file are required when client_auth is \"\(clientAuth.rawValue)\" (RFC 8705)")
        }
        let exchange = readTokenExchange(root)
        let dpop = root.choice("dpop", as: DPoPMode.self) ?? .off
        let par = root.choice("par", as: PushedAuthorizationMode.self) ?? .auto

        let grants = root.array("grants") { item, path -> Grant? in
            let allowed = Grant.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            guard case .string(let name) = item, let grant = Grant(rawValue: name) else {
                problems.add(path, "expected one of \(allowed), found \(Self.describe(item))")
                return nil
            }
            return grant
        }
        switch root.raw("grants") {
        case nil: root.missing("grants", "the grants this provider may use, e.g. [\"device_code\", \"authorization_code\"]")
        case .array(let items) where items.isEmpty: root.add("grants", "must list at least one grant")
        default: break
        }
        if grants?.contains(.clientCredentials) == true, clientAuth == .none {
            root.add(
                "grants",
                "client_credentials needs client authentication: set client_secret_file, client_key_file, client_assertion_file or tls.client_cert_file"
            )
        }
        let workload = WorkloadIdentity.read(root, grants: grants, clientAuth: clientAuth)
        if !isOIDC {
            for (grant, endpoint, key) in [
                (Grant.deviceCode, endpoints.deviceAuthorization, "device_authorization"),
                (.authorizationCode, endpoints.authorization, "authorization"),
            ]
            where grants?.contains(grant) == true && endpoint == nil {
                problems.add("$.endpoints.\(key)", "required for the \(grant.rawValue) grant")
            }
        }

        var redirectURI: URL?
        if let string = root.string("redirect_uri") {
            redirectURI = URL(string: string)
            let host = redirectURI?.host.map { $0.trimming("[]") }
            if redirectURI?.scheme != "http" || !(host == "127.0.0.1" || host == "::1") {
                // RFC 8252 §7.3 / §8.3: loopback IP literal, not "localhost".
                root.add("redirect_uri", "must be a loopback URL such as http://127.0.0.1/callback (RFC 8252 §7.3), found \"\(string)\"")
                redirectURI = nil
            }
        }

        var connect = 3000
        var total = 10_000
        if let timeouts = root.object("timeouts") {
            timeouts.rejectUnknownKeys(allowed: ["connect_ms", "total_ms"], context: "timeouts")
            connect = timeouts.integer("connect_ms", in: 1...120_000) ?? connect
            total = timeouts.integer("total_ms", in: 1...600_000) ?? total
            if connect > total {
                timeouts.add("connect_ms", "must not exceed total_ms (\(total))")
            }
        }
        let quirks = ProviderQuirks.read(root, isOIDC: isOIDC, issuer: issuer)
        guard let clientID, let grants else { return nil }
        var settings = RemoteProviderSettings(
            issuer: issuer,
            endpoints: endpoints,
            clientID: clientID,
            clientSecretFile: secretFile,
            clientAuthentication: clientAuth,
            grants: grants,
            audience: root.string("audience"),
            redirectURI: redirectURI,
            caFile: caFile,
            clientKeyFile: clientKeyFile,
            clientKeyID: clientKeyID,
            tlsClientCertificateFile: tlsCertificate,
            tlsClientKeyFile: tlsKey,
            dpop: dpop,
            pushedAuthorization: par,
            tokenExchange: exchange,
            connectTimeoutMilliseconds: connect,
            totalTimeoutMilliseconds: total,
            allowInsecureHTTPLoopback: insecureLoopback
        )
        settings.quirks = quirks
        settings.workload = workload
        return settings
    }

    /// An absolute https URL (or http to 127.0.0.1 / ::1 when the provider opts in).
    private static func checkedURL(_ string: String, path: String, allowLoopbackHTTP: Bool, problems: ProblemCollector) -> URL? {
        guard let url = URL(string: string), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            problems.add(path, "must be an absolute https URL, found \"\(string)\"")
            return nil
        }
        let bareHost = host.trimming("[]")
        switch scheme {
        case "https":
            break
        case "http" where allowLoopbackHTTP && (bareHost == "127.0.0.1" || bareHost == "::1"):
            break
        case "http" where allowLoopbackHTTP:
            problems.add(path, "plain http is allowed only to 127.0.0.1 or ::1, found host \"\(host)\"")
            return nil
        default:
            problems.add(path, "must be an https URL, found \"\(string)\"")
            return nil
        }
        if url.user != nil || url.password != nil {
            problems.add(path, "must not contain a user name or password")
            return nil
        }
        if url.fragment != nil {
            problems.add(path, "must not contain a fragment (#…)")
            return nil
        }
        return url
    }

    private static func describe(_ value: JSONValue) -> String {
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
