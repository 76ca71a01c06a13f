import FoundationEssentials

/// The ways real providers depart from the RFCs that a provider file can describe
/// (docs/CONFIGURATION.md, "Provider quirks"); every one is off unless the file says so.
public struct ProviderQuirks: Sendable, Hashable {
    /// What an access token whose response has no `expires_in` (RFC 6749 §5.1 only
    /// RECOMMENDS it) lives: `expires_in_default`.
    public enum MissingLifetime: Sendable, Hashable {
        /// Assume this many seconds (one hour unless the file says otherwise).
        case seconds(Int)
        /// The token lives until it is revoked (GitHub OAuth apps): never refreshed.
        case never
    }

    public var missingLifetime: MissingLifetime = .seconds(3600)
    /// `token_errors_with_http_200`: the token endpoint answers its RFC 6749 §5.2 errors
    /// (device polling's `authorization_pending` among them) with HTTP 200, as GitHub does.
    public var tokenErrorsWithHTTP200 = false
    /// `issuer_template`: the issuer the discovery document and the ID tokens name, with
    /// `{tenantid}` standing for the token's `tid` claim (Microsoft Entra ID's multi-tenant
    /// endpoints).
    public var issuerTemplate: String?
    /// `authorization_parameters`: extra parameters of the authorization request
    /// (`access_type=offline`, `prompt=consent`, …), sorted by name.
    public var authorizationParameters: [AuthorizationParameter] = []
    /// `userinfo_claims`: members of the userinfo answer that stand for standard claims it
    /// lacks, standard claim → member (GitHub's `/user` has `id` and `login`, no `sub`:
    /// `{"sub": "id", "preferred_username": "login"}`). A number becomes its decimal string.
    public var userinfoClaims: [String: String] = [:]

    /// The standard claims `userinfo_claims` may name (OpenID Connect Core §5.1).
    public static let mappableClaims: Set<String> = ["sub", "preferred_username", "name", "email"]

    /// `claims` with the standard claims it lacks taken from the members ``userinfoClaims`` names.
    public func standardizing(_ claims: [String: JSONValue]) -> [String: JSONValue] {
        var claims = claims
        for (standard, member) in userinfoClaims where claims[standard] == nil {
            switch claims[member] {
            case .string(let value)?: claims[standard] = .string(value)
            case .number(let value)? where value == value.rounded() && abs(value) < 1e15: claims[standard] = .string(String(Int64(value)))
            default: break
            }
        }
        return claims
    }

    /// One extra parameter of the authorization request.
    public struct AuthorizationParameter: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The placeholder of ``issuerTemplate``.
    public static let tenantPlaceholder = "{tenantid}"

    /// Authorization request parameters authgate sets itself, refused in
    /// `authorization_parameters` (`prompt` excepted: the file's applies when the caller
    /// asks for none).
    public static let reservedAuthorizationParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "scope",
        "nonce", "dpop_jkt", "request_uri", "request", "response_mode",
    ]

    public init() {}

    /// The issuer `template` names for the tenant `tenant`; `nil` when the tenant is not a
    /// plausible tenant id (letters, digits, `-`, `.`; at most 128).
    public static func issuer(_ template: String, tenant: String) -> String? {
        guard !tenant.isEmpty, tenant.utf8.count <= 128,
            tenant.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") })
        else { return nil }
        return template.replacing(tenantPlaceholder, with: tenant)
    }
}

extension ProviderQuirks {
    /// The keys of a remote provider file these settings are read from.
    static let keys: Set<String> = ["expires_in_default", "token_errors_with_http_200", "issuer_template", "authorization_parameters", "userinfo_claims"]

    /// Reads the quirk keys of a remote provider's file.
    static func read(_ root: ObjectReader, isOIDC: Bool, issuer: URL?) -> ProviderQuirks {
        var quirks = ProviderQuirks()
        switch root.raw("expires_in_default") {
        case nil: break
        case .string("never")?: quirks.missingLifetime = .never
        case .number?: quirks.missingLifetime = root.integer("expires_in_default", in: 1...31_536_000).map { .seconds($0) } ?? quirks.missingLifetime
        case let other?:
            let found = other.stringValue.map { "\"\($0.prefix(100))\"" } ?? other.typeName
            root.add("expires_in_default", "expected a number of seconds or \"never\", found \(found)")
        }
        quirks.tokenErrorsWithHTTP200 = root.bool("token_errors_with_http_200") ?? false
        if let template = root.string("issuer_template") {
            let example = ProviderQuirks.issuer(template, tenant: "tenant")
            if !isOIDC {
                root.add("issuer_template", "applies only to a provider of type \"oidc\" (it checks discovery and ID tokens)")
            } else if !template.contains(tenantPlaceholder) {
                root.add("issuer_template", "must contain \(tenantPlaceholder), found \"\(template.prefix(200))\"")
            } else if let example, URL(string: example)?.scheme != "https" || URL(string: example)?.host == nil {
                root.add("issuer_template", "must be an https URL with \(tenantPlaceholder) in its path, found \"\(template.prefix(200))\"")
            } else if issuer == nil {
                root.add("issuer", "required with issuer_template: discovery starts from it")
            } else {
                quirks.issuerTemplate = template
            }
        }
        if let parameters = root.object("authorization_parameters") {
            var read: [AuthorizationParameter] = []
            for name in parameters.keys {
                guard let value = parameters.string(name) else { continue }
                if reservedAuthorizationParameters.contains(name) {
                    parameters.add(name, "is set by authgate itself and cannot be overridden")
                } else if name == "audience" {
                    parameters.add(name, "use the provider's \"audience\" key instead")
                } else if name.isEmpty || name.utf8.count > 128 || name.containsControlCharacters || value.utf8.count > 1024 || value.containsControlCharacters
                {
                    parameters.add(name, "a parameter is a name of at most 128 and a value of at most 1024 printable characters")
                } else {
                    read.append(AuthorizationParameter(name: name, value: value))
                }
            }
            quirks.authorizationParameters = read
        }
        if let claims = root.object("userinfo_claims") {
            for standard in claims.keys {
                guard let member = claims.string(standard) else { continue }
                if !mappableClaims.contains(standard) {
                    claims.add(standard, "expected one of \(mappableClaims.sorted().map { "\"\($0)\"" }.joined(separator: ", "))")
                } else if member.utf8.count > 128 || member.containsControlCharacters {
                    claims.add(standard, "a member name is at most 128 printable characters")
                } else {
                    quirks.userinfoClaims[standard] = member
                }
            }
        }
        return quirks
    }
}
