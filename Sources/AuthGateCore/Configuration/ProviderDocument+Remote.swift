import FoundationEssentials

/// The keys of `oidc` and `oauth2` provider files: endpoints, the client and how it
/// authenticates, grants, TLS, timeouts, token exchange, and (read by their own types) the
/// quirks and workload identity keys.
extension ProviderDocument {
    /// `token_exchange`: the audiences and token types `token.exchange` may ask for.
    static func readTokenExchange(_ root: ObjectReader) -> TokenExchangePolicy {
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

    static func readRemote(_ root: ObjectReader, isOIDC: Bool, problems: ProblemCollector) -> RemoteProviderSettings? {
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
}
