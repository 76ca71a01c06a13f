import AuthGateCore
import Foundation
import Testing

/// Parses `json` as the file `providers.d/<id>.json` and returns its report.
private func load(_ json: String, id: String = "corp") -> ProviderFileReport {
    ProviderConfigurationLoader.parse(Data(json.utf8), id: id, file: "providers.d/\(id).json")
}

private func fixture(_ name: String) throws -> Data {
    let url = try #require(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures"))
    return try Data(contentsOf: url)
}

/// The messages of a report's problems, as `path: message`.
private func problems(_ report: ProviderFileReport) -> [String] {
    report.problems.map { "\($0.path): \($0.message)" }
}

@Suite("Provider configuration files")
struct ProviderConfigurationLoaderTests {
    @Test("a full oidc file becomes a typed configuration")
    func fullOIDC() throws {
        let report = ProviderConfigurationLoader.parse(try fixture("oidc-full"), id: "corp", file: "providers.d/corp.json")
        let configuration = try #require(report.configuration, "\(report.problems)")
        #expect(configuration.id.rawValue == "corp")
        #expect(configuration.kind == .oidc)
        #expect(configuration.displayName == "Corp SSO")
        #expect(configuration.storage == .persistent)
        #expect(configuration.refresh == RefreshPolicy(beforeExpirySeconds: 120, maxBackoffSeconds: 600, firstUseSpreadSeconds: 8))
        #expect(configuration.access == AccessRules(users: ["alice"], groups: ["developers"], executables: ["/usr/bin/git"]))
        #expect(configuration.scopes == ["openid", "profile", "offline_access"])
        #expect(configuration.grants == [.deviceCode, .authorizationCode, .clientCredentials])
        guard case .oidc(let remote) = configuration.settings else {
            Issue.record("not oidc")
            return
        }
        #expect(remote.issuer?.absoluteString == "https://sso.example.com/realms/corp")
        #expect(remote.endpoints.userinfo?.absoluteString == "https://sso.example.com/userinfo")
        #expect(remote.endpoints.token == nil)
        #expect(remote.clientAuthentication == .clientSecretPost)
        #expect(remote.clientSecretFile == "/etc/authgate/secrets/corp")
        #expect(remote.redirectURI?.port == 8765)
        #expect(remote.caFile == "/etc/authgate/ca/corp.pem")
        #expect(remote.connectTimeoutMilliseconds == 2000 && remote.totalTimeoutMilliseconds == 8000)
        #expect(remote.audience == "api://payments")
        #expect(report.warnings.isEmpty)
    }

    @Test("a minimal oauth2 file gets defaults and an RFC 9700 warning for the password grant")
    func minimalOAuth2() throws {
        let report = ProviderConfigurationLoader.parse(try fixture("oauth2-minimal"), id: "api", file: "providers.d/api.json")
        let configuration = try #require(report.configuration, "\(report.problems)")
        #expect(configuration.displayName == "api")
        #expect(configuration.storage == .memory)
        #expect(configuration.refresh == RefreshPolicy())
        #expect(configuration.access.admitsEveryone)
        guard case .oauth2(let remote) = configuration.settings else {
            Issue.record("not oauth2")
            return
        }
        #expect(remote.clientAuthentication == .none)
        #expect(remote.connectTimeoutMilliseconds == 3000 && remote.totalTimeoutMilliseconds == 10_000)
        #expect(
            report.warnings.map(\.description) == [
                "providers.d/api.json: $.grants: the password grant is deprecated by the OAuth 2.0 Security Best Current Practice (RFC 9700 §2.4); prefer device_code or authorization_code"
            ]
        )
    }

    @Test("a full mock file")
    func fullMock() throws {
        let report = ProviderConfigurationLoader.parse(try fixture("mock-full"), id: "mock", file: "providers.d/mock.json")
        let configuration = try #require(report.configuration, "\(report.problems)")
        guard case .mock(let mock) = configuration.settings else {
            Issue.record("not mock")
            return
        }
        #expect(mock.users.map(\.username) == ["demo"])
        #expect(mock.users.first?.email == "demo@example.com")
        #expect(mock.latencyMilliseconds == 5...20)
        #expect(mock.accessTokenLifetimeSeconds == 60)
        #expect(mock.refreshTokenLifetimeSeconds == 600)
        #expect(mock.allowRegistration == false)
        #expect(mock.passwordPolicy.minimumLength == 12 && mock.passwordPolicy.requireUppercase && mock.passwordPolicy.requireSymbol)
        #expect(configuration.grants == [.password])
    }

    /// Each bad document and the exact problems it must produce.
    static let badDocuments: [(String, [String])] = [
        (
            #"{"type": "oidc", "issuer": "http://sso.example.com", "client_id": "a", "grants": ["device_code"], "scopes": ["openid"]}"#,
            [#"$.issuer: must be an https URL, found "http://sso.example.com""#]
        ),
        (
            #"{"type": "oidc", "issuer": "https://sso.example.com", "client_id": "a", "grants": ["device_code"], "scopes": ["openid"], "clientid": "x"}"#,
            [#"$.clientid: unknown key for a provider of type "oidc" (did you mean "client_id"?)"#]
        ),
        (
            #"{"type": "oidc", "client_id": 5, "grants": ["device_code"], "scopes": ["openid"]}"#,
            ["$.client_id: expected a string, found a number", "$.issuer: required: the issuer URL (discovery starts from it)"]
        ),
        (
            #"{"type": "saml"}"#,
            [#"$.type: expected one of "oidc", "oauth2", "mock", found "saml""#]
        ),
        (
            #"{}"#,
            [#"$.type: required: one of "oidc", "oauth2", "mock""#]
        ),
        (
            #"[1, 2]"#,
            ["$: expected an object, found an array"]
        ),
        (
            #"{"type": "oauth2", "client_id": "a", "grants": ["password"]}"#,
            ["$.endpoints: required: an object with at least the token endpoint (an oauth2 provider has no discovery)"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"authorization": "https://a.example/auth"}, "client_id": "a", "grants": ["device_code"]}"#,
            ["$.endpoints.token: required: the token endpoint's https URL", "$.endpoints.device_authorization: required for the device_code grant"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "http://10.0.0.1/token"}, "client_id": "a", "grants": ["password"], "allow_insecure_http_loopback": true}"#,
            [#"$.endpoints.token: plain http is allowed only to 127.0.0.1 or ::1, found host "10.0.0.1""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": []}"#,
            ["$.grants: must list at least one grant"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["implicit", 3]}"#,
            [
                #"$.grants[0]: expected one of "password", "device_code", "authorization_code", "client_credentials", "jwt_bearer", "token_exchange", found "implicit""#,
                #"$.grants[1]: expected one of "password", "device_code", "authorization_code", "client_credentials", "jwt_bearer", "token_exchange", found a number"#,
            ]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["client_credentials"]}"#,
            ["$.grants: client_credentials needs client authentication: set client_secret_file, client_key_file, client_assertion_file or tls.client_cert_file"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["client_credentials"], "client_auth": "private_key_jwt"}"#,
            [#"$.client_key_file: required when client_auth is "private_key_jwt": the client's private key (PEM, EC P-256 or RSA)"#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["client_credentials"], "client_auth": "tls_client_auth"}"#,
            [#"$.tls: client_cert_file and client_key_file are required when client_auth is "tls_client_auth" (RFC 8705)"#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "tls": {"client_cert_file": "/c.pem"}}"#,
            [#"$.tls.client_key_file: required with tls.client_cert_file: mutual TLS needs both"#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "dpop": "on", "par": "always"}"#,
            [#"$.dpop: expected one of "off", "required", found "on""#, #"$.par: expected one of "auto", "required", "off", found "always""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "client_auth": "client_secret_jwt"}"#,
            [#"$.client_secret_file: required when client_auth is "client_secret_jwt""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "client_auth": "client_secret_basic"}"#,
            [#"$.client_secret_file: required when client_auth is "client_secret_basic""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "client_secret_file": "secrets/x"}"#,
            [#"$.client_secret_file: must be an absolute path, found "secrets/x""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "redirect_uri": "http://localhost/cb"}"#,
            [#"$.redirect_uri: must be a loopback URL such as http://127.0.0.1/callback (RFC 8252 §7.3), found "http://localhost/cb""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "timeouts": {"connect_ms": 0, "total_ms": 1.5}}"#,
            ["$.timeouts.connect_ms: must be between 1 and 120000", "$.timeouts.total_ms: expected an integer, found a number"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "storage": "disk", "refresh": {"before_expiry_seconds": -1}}"#,
            [#"$.storage: expected one of "memory", "persistent", found "disk""#, "$.refresh.before_expiry_seconds: must be between 0 and 86400"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["client_credentials"], "client_secret_file": "/etc/s", "refresh": {"first_use_spread_seconds": 301}}"#,
            ["$.refresh.first_use_spread_seconds: must be between 0 and 300"]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "access": {"executables": ["git"], "hosts": []}}"#,
            [#"$.access.hosts: unknown key for access"#, #"$.access.executables[0]: must be an absolute path, found "git""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"], "scopes": ["open id"]}"#,
            [#"$.scopes[0]: a scope is one token of printable ASCII without spaces, quotes or backslashes, found "open id""#]
        ),
        (
            #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t#x"}, "client_id": "a", "grants": ["password"]}"#,
            ["$.endpoints.token: must not contain a fragment (#…)"]
        ),
        (
            #"{"type": "mock", "users": [{"username": "a", "password": "p"}, {"username": "A", "password": "q"}, {"password": "r", "email": "nope"}]}"#,
            [
                #"$.users[1].username: duplicate user "A""#, "$.users[2].email: must be an email address like name@example.com",
                "$.users[2].username: required: the user's login name",
            ]
        ),
        (
            #"{"type": "mock", "latency_ms": [500, 100]}"#,
            ["$.latency_ms: expected [min, max] in milliseconds with min <= max"]
        ),
        (
            #"{"type": "mock", "latency_ms": 100}"#,
            ["$.latency_ms: expected an array, found a number"]
        ),
        (
            #"{"type": "mock", "password_policy": {"min_length": 50, "max_length": 20}, "client_id": "x"}"#,
            [#"$.client_id: unknown key for a provider of type "mock""#, "$.password_policy.min_length: must not exceed max_length (20)"]
        ),
        (
            #"{"type": "mock", "allow_registration": "yes"}"#,
            ["$.allow_registration: expected true or false, found a string"]
        ),
    ]

    @Test("each problem names its JSON path and what was expected", arguments: badDocuments)
    func badDocument(_ json: String, _ expected: [String]) {
        let report = load(json)
        #expect(report.configuration == nil)
        #expect(Set(problems(report)) == Set(expected))
        #expect(report.problems.allSatisfy { $0.file == "providers.d/corp.json" })
    }

    @Test("invalid JSON is reported with the parser's explanation")
    func invalidJSON() throws {
        let report = load("{\"type\": \"mock\",\n  \"users\": [}")
        #expect(report.problems.count == 1)
        let problem = try #require(report.problems.first)
        #expect(problem.path == "$")
        #expect(problem.message.hasPrefix("not valid JSON: "))
        #expect(problem.description.hasPrefix("providers.d/corp.json: $: not valid JSON"))
    }

    @Test("a file name that is not a valid id makes the provider invalid", arguments: ["Corp", "-corp", "corp.dev", "c orp", ""])
    func badIdentifier(_ id: String) {
        let report = load(#"{"type": "mock"}"#, id: id)
        #expect(report.configuration == nil)
        #expect(problems(report).contains { $0.hasPrefix("$: the file name must be ID.json") })
    }

    @Test("one bad file never stops the others; non-json files are ignored")
    func directory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("authgate-loader-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(#"{"type": "mock"}"#.utf8).write(to: directory.appendingPathComponent("good.json"))
        try Data(#"{"type": "mock", "extra": 1}"#.utf8).write(to: directory.appendingPathComponent("bad.json"))
        try Data("ignored".utf8).write(to: directory.appendingPathComponent("notes.txt"))
        try Data("ignored".utf8).write(to: directory.appendingPathComponent("corp.json.example"))
        try Data(repeating: 0x20, count: ProviderConfigurationLoader.maximumFileSize + 1).write(to: directory.appendingPathComponent("huge.json"))

        let reports = try ProviderConfigurationLoader.load(directory: directory.path)
        #expect(reports.map(\.id) == ["bad", "good", "huge"])
        #expect(reports[1].configuration != nil)
        #expect(problems(reports[0]) == [#"$.extra: unknown key for a provider of type "mock""#])
        #expect(
            problems(reports[2]) == [
                "$: the provider file \(directory.path)/huge.json is \(ProviderConfigurationLoader.maximumFileSize + 1) bytes; the limit is \(ProviderConfigurationLoader.maximumFileSize)"
            ]
        )
    }

    @Test("a missing directory is an error of its own")
    func missingDirectory() {
        #expect(throws: ProvidersDirectoryError.self) {
            try ProviderConfigurationLoader.load(directory: "/nonexistent/providers.d")
        }
    }

    @Test(
        "credential_helper: hosts without scheme or path, lowercased; a host two files claim (also once as host:443) makes the later one invalid, naming both"
    )
    func credentialHelperHosts() throws {
        let good = load(#"{"type": "mock", "credential_helper": {"hosts": ["Git.Example.com", "registry.example.com:5000", "[::1]:8443"]}}"#)
        let helper = try #require(good.configuration?.credentialHelper)
        #expect(helper.hosts == ["git.example.com", "registry.example.com:5000", "[::1]:8443"] && helper.username == "oauth2")
        let bad = load(#"{"type": "mock", "credential_helper": {"hosts": ["https://git.example.com", "a.example.com/path", "h:99999"], "username": "a:b"}}"#)
        #expect(problems(bad).count == 4, "\(problems(bad))")
        #expect(problems(bad).first?.hasPrefix("$.credential_helper.hosts[0]: must be a host name") == true)
        let first = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"]}}"#, id: "first")
        let second = load(#"{"type": "mock", "credential_helper": {"hosts": ["GIT.example.com"]}}"#, id: "second")
        let checked = ProviderConfigurationLoader.refusingSharedCredentialHosts([first, second])
        #expect(checked[0].configuration != nil)
        #expect(problems(checked[1]) == ["$.credential_helper.hosts: git.example.com is claimed by \(first.file) too; a host belongs to one provider"])
        // The same host with https's port named: the helpers match it as the same host.
        let withPort = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com:443"]}}"#, id: "third")
        let againChecked = ProviderConfigurationLoader.refusingSharedCredentialHosts([first, withPort])
        #expect(problems(againChecked[1]) == ["$.credential_helper.hosts: git.example.com is claimed by \(first.file) too; a host belongs to one provider"])
    }

    @Test(
        "credential_helper.paths and authtype: prefixes normalised to segment-ending form; providers with different prefixes share a host, the same prefix twice does not"
    )
    func credentialHelperPaths() throws {
        let scoped = load(
            #"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"], "paths": ["org-a", "/org-b/team/", "org-a/"], "authtype": "bearer"}}"#
        )
        let helper = try #require(scoped.configuration?.credentialHelper, "\(problems(scoped))")
        #expect(helper.paths == ["org-a/", "org-b/team/"] && helper.authType == .bearer)
        #expect(load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"]}}"#).configuration?.credentialHelper?.authType == .basic)
        let bad = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"], "paths": ["/", "a/../b", "a b"], "authtype": "digest"}}"#)
        #expect(problems(bad).count == 4, "\(problems(bad))")
        #expect(problems(bad).first?.hasPrefix(#"$.credential_helper.paths[0]: must be a path prefix on the hosts such as "org-a/""#) == true)
        #expect(problems(bad).last == #"$.credential_helper.authtype: expected one of "basic", "bearer", found "digest""#)
        #expect(
            problems(load(#"{"type": "mock", "credential_helper": {"hosts": ["g.example.com"], "paths": []}}"#)).first?.hasPrefix("$.credential_helper.paths:")
                == true
        )

        let everyPath = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"]}}"#, id: "all")
        let orgA = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"], "paths": ["org-a/"]}}"#, id: "a")
        let orgB = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"], "paths": ["org-b/", "org-a/team/"]}}"#, id: "b")
        let orgAAgain = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"], "paths": ["/org-a"]}}"#, id: "again")
        let checked = ProviderConfigurationLoader.refusingSharedCredentialHosts([everyPath, orgA, orgB, orgAAgain])
        #expect(checked.prefix(3).allSatisfy { $0.configuration != nil }, "\(checked.map(problems))")
        #expect(
            problems(checked[3]) == [
                "$.credential_helper.paths: git.example.com/org-a/ is claimed by \(orgA.file) too; a host's path prefix belongs to one provider"
            ]
        )
    }

    @Test("credential_helper.tools: git, docker or both (the default); anything else, or none, is a clear error")
    func credentialHelperTools() throws {
        let both = load(#"{"type": "mock", "credential_helper": {"hosts": ["git.example.com"]}}"#)
        #expect(both.configuration?.credentialHelper?.tools == ["git", "docker"])
        let docker = load(#"{"type": "mock", "credential_helper": {"hosts": ["r.example.com"], "tools": ["docker"]}}"#)
        #expect(docker.configuration?.credentialHelper?.tools == ["docker"])
        let unknown = load(#"{"type": "mock", "credential_helper": {"hosts": ["r.example.com"], "tools": ["git", "kubectl"]}}"#)
        #expect(problems(unknown) == [#"$.credential_helper.tools[1]: must be "git" or "docker", found "kubectl""#])
        let none = load(#"{"type": "mock", "credential_helper": {"hosts": ["r.example.com"], "tools": []}}"#)
        #expect(problems(none) == [#"$.credential_helper.tools: must name at least one of "git" and "docker" (leave it out for both)"#])
        let wrongType = load(#"{"type": "mock", "credential_helper": {"hosts": ["r.example.com"], "tools": "git"}}"#)
        #expect(problems(wrongType).count == 1 && problems(wrongType).first?.hasPrefix("$.credential_helper.tools") == true, "\(problems(wrongType))")
    }
}
