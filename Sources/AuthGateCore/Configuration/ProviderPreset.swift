import FoundationEssentials

/// `preset` in a provider file: a big provider's endpoints, grants, scopes, credential-helper
/// defaults and documented quirks (docs/PROVIDERS.md cites the provider's documentation for
/// each), filled in from `preset_options` (`host`, `tenant`, `realm`, `authorization_server`).
/// Every key the file sets itself wins; objects (`endpoints`, `credential_helper`, …) are
/// merged key by key.
public enum ProviderPreset: String, Sendable, Hashable, CaseIterable {
    case github, gitlab, gitea, forgejo, google, entra, okta, keycloak, auth0

    /// The keys of a provider file this reads.
    static let keys: Set<String> = ["preset", "preset_options"]

    /// Every option any preset takes.
    public static let allOptions: Set<String> = ["host", "tenant", "realm", "authorization_server"]

    /// The options this preset takes, each with whether it is required.
    public var options: [String: Bool] {
        switch self {
        case .github, .gitlab: ["host": false]
        case .gitea, .forgejo, .auth0: ["host": true]
        case .google: [:]
        case .entra: ["tenant": false]
        case .okta: ["host": true, "authorization_server": false]
        case .keycloak: ["host": true, "realm": true]
        }
    }

    /// The provider file this preset stands for, given checked options.
    public func document(_ options: [String: String]) -> [String: JSONValue] {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        let host = options["host"]
        switch self {
        case .github:
            let host = host ?? "github.com"
            let api = host == "github.com" ? "https://api.github.com/user" : "https://\(host)/api/v3/user"
            return [
                "type": .string("oauth2"), "display_name": .string(host == "github.com" ? "GitHub" : "GitHub (\(host))"),
                "endpoints": .object([
                    "device_authorization": .string("https://\(host)/login/device/code"),
                    "authorization": .string("https://\(host)/login/oauth/authorize"),
                    "token": .string("https://\(host)/login/oauth/access_token"),
                    "userinfo": .string(api),
                ]),
                "grants": strings(["device_code"]), "scopes": strings(["repo", "read:user"]),
                "expires_in_default": .string("never"), "token_errors_with_http_200": .bool(true),
                "userinfo_claims": .object(["sub": .string("id"), "preferred_username": .string("login")]),
                "credential_helper": .object(["hosts": strings([host]), "username": .string("oauth2")]),
            ]
        case .gitlab:
            let host = host ?? "gitlab.com"
            return [
                "type": .string("oidc"), "display_name": .string(host == "gitlab.com" ? "GitLab" : "GitLab (\(host))"),
                "issuer": .string("https://\(host)"), "grants": strings(["device_code", "authorization_code"]),
                "scopes": strings(["openid", "profile", "email", "read_repository", "write_repository"]),
                "credential_helper": .object(["hosts": strings([host]), "username": .string("oauth2")]),
            ]
        case .gitea, .forgejo:
            let host = host ?? ""
            return [
                "type": .string("oidc"), "display_name": .string("\(self == .gitea ? "Gitea" : "Forgejo") (\(host))"),
                // The issuer is the instance's ROOT_URL, which ends with a slash.
                "issuer": .string("https://\(host)/"), "grants": strings(["authorization_code"]),
                "scopes": strings(["openid", "profile", "email"]),
                "credential_helper": .object(["hosts": strings([host]), "username": .string("oauth2")]),
            ]
        case .google:
            return [
                "type": .string("oidc"), "display_name": .string("Google"), "issuer": .string("https://accounts.google.com"),
                "grants": strings(["authorization_code", "device_code"]), "scopes": strings(["openid", "email", "profile"]),
                "authorization_parameters": .object(["access_type": .string("offline"), "prompt": .string("consent")]),
            ]
        case .entra:
            let tenant = options["tenant"] ?? "organizations"
            var document: [String: JSONValue] = [
                "type": .string("oidc"), "display_name": .string("Microsoft Entra ID"),
                "issuer": .string("https://login.microsoftonline.com/\(tenant)/v2.0"),
                "grants": strings(["device_code", "authorization_code"]),
                "scopes": strings(["openid", "profile", "email", "offline_access"]),
            ]
            switch tenant {
            case "organizations", "common":
                document["issuer_template"] = .string("https://login.microsoftonline.com/{tenantid}/v2.0")
            case "consumers":
                // Its discovery names the one tenant of personal accounts.
                document["issuer"] = .string("https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0")
            default:
                break
            }
            return document
        case .okta:
            let path = options["authorization_server"].map { "/oauth2/\($0)" } ?? ""
            return [
                "type": .string("oidc"), "display_name": .string("Okta"), "issuer": .string("https://\(host ?? "")\(path)"),
                "grants": strings(["device_code", "authorization_code"]),
                "scopes": strings(["openid", "profile", "email", "offline_access"]),
            ]
        case .keycloak:
            return [
                "type": .string("oidc"), "display_name": .string("Keycloak (\(options["realm"] ?? ""))"),
                "issuer": .string("https://\(host ?? "")/realms/\(options["realm"] ?? "")"),
                "grants": strings(["device_code", "authorization_code"]), "scopes": strings(["openid", "profile", "email"]),
            ]
        case .auth0:
            return [
                // Auth0's issuer is the tenant's URL with a trailing slash.
                "type": .string("oidc"), "display_name": .string("Auth0"), "issuer": .string("https://\(host ?? "")/"),
                "grants": strings(["device_code", "authorization_code"]),
                "scopes": strings(["openid", "profile", "email", "offline_access"]),
            ]
        }
    }

    /// Checks one option's value; `nil` when it is fine, else what it must be.
    static func problem(option: String, value: String) -> String? {
        switch option {
        case "host":
            guard let normalized = CredentialHost.normalize(value), normalized == value, !value.hasPrefix("[") else {
                return "must be a lowercase host name with an optional :port, without a scheme or path, found \"\(value.prefix(100))\""
            }
            return nil
        case "tenant":
            return ProviderQuirks.issuer("{tenantid}", tenant: value) == nil
                ? "must be a tenant id, a verified domain, organizations, common or consumers, found \"\(value.prefix(100))\"" : nil
        default:
            let allowed =
                !value.isEmpty && value.utf8.count <= 128
                && value.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") }
            return allowed ? nil : "must be 1–128 letters, digits, -, _ or ., found \"\(value.prefix(100))\""
        }
    }

    /// The document with its preset filled in: the preset's keys under the file's. A document
    /// without `preset`, or whose preset or options are wrong (reported), comes back as it is.
    static func expand(_ document: JSONValue, problems: ProblemCollector) -> JSONValue {
        guard case .object(let file) = document, file["preset"] != nil || file["preset_options"] != nil,
            let reader = ObjectReader(document, path: "$", problems: problems)
        else {
            return document
        }
        let preset = file["preset"] == nil ? nil : reader.choice("preset", as: ProviderPreset.self)
        var options: [String: String] = [:]
        var optionsFine = true
        if let optionsReader = reader.object("preset_options") {
            optionsReader.rejectUnknownKeys(
                allowed: preset.map { Set($0.options.keys) } ?? allOptions,
                context: preset.map { "preset_options of the \"\($0.rawValue)\" preset" } ?? "preset_options"
            )
            for name in optionsReader.keys where (preset.map { $0.options[name] != nil } ?? allOptions.contains(name)) {
                guard let value = optionsReader.string(name) else {
                    optionsFine = false
                    continue
                }
                if let problem = problem(option: name, value: value) {
                    optionsReader.add(name, problem)
                    optionsFine = false
                }
                options[name] = value
            }
            if file["preset"] == nil {
                reader.add("preset_options", "applies only with preset")
            }
        } else if file["preset_options"] != nil {
            optionsFine = false
        }
        guard let preset, optionsFine else { return document }
        var missing = false
        for (name, required) in preset.options.sorted(by: { $0.key < $1.key }) where required && options[name] == nil {
            problems.add("$.preset_options.\(name)", "required by the \"\(preset.rawValue)\" preset")
            missing = true
        }
        guard !missing else { return document }
        var merged = preset.document(options)
        for (key, value) in file {
            if case .object(let mine) = value, case .object(let theirs)? = merged[key] {
                merged[key] = .object(theirs.merging(mine) { _, file in file })
            } else {
                merged[key] = value
            }
        }
        return .object(merged)
    }
}
