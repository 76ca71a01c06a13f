/// The provider-file keys of workload identity federation: a service signs in with the
/// short-lived JWT its platform hands it (a Kubernetes projected service-account token, a CI
/// job's ID token, a SPIFFE JWT-SVID), read from a file for every request, instead of a secret
/// on disk. See docs/CONFIGURATION.md ("Services without a secret").
public struct WorkloadIdentity: Sendable, Hashable {
    /// `client_assertion_file`: the client assertion when `client_auth` is
    /// `client_assertion_file` (RFC 7521 §4.2).
    public var clientAssertionFile: String?
    /// `assertion_file`: the `jwt_bearer` grant's assertion as the platform wrote it (RFC 7523 §2.1).
    public var assertionFile: String?
    /// `assertion_key_file` and the claims of the `jwt_bearer` assertions the daemon signs with it.
    public var assertionKey: AssertionKey?
    /// `subject_token_file`: the platform token the `token_exchange` grant exchanges (RFC 8693).
    public var subjectTokenFile: String?
    /// `subject_token_type`: what the subject token is (a JWT unless the file says otherwise).
    public var subjectTokenType = TokenExchangePolicy.jwt

    /// A key the daemon signs `jwt_bearer` assertions with, as Google and Okta service
    /// accounts are used: `iss` (the client unless `assertion_issuer`), `sub` (the issuer
    /// unless `assertion_subject`), `aud` (the token endpoint unless `assertion_audience`).
    public struct AssertionKey: Sendable, Hashable {
        public var file: String
        public var keyID: String?
        public var issuer: String?
        public var subject: String?
        public var audience: String?

        public init(file: String, keyID: String? = nil, issuer: String? = nil, subject: String? = nil, audience: String? = nil) {
            self.file = file
            self.keyID = keyID
            self.issuer = issuer
            self.subject = subject
            self.audience = audience
        }
    }

    /// The `subject_token_type`s a platform's token can have (RFC 8693 §3).
    public static let subjectTokenTypes = [TokenExchangePolicy.jwt, TokenExchangePolicy.idToken, TokenExchangePolicy.accessToken]

    public init() {}
}

extension WorkloadIdentity {
    /// The keys of a remote provider file these settings are read from.
    static let keys: Set<String> = [
        "client_assertion_file", "assertion_file", "assertion_key_file", "assertion_key_id", "assertion_issuer", "assertion_subject",
        "assertion_audience", "subject_token_file", "subject_token_type",
    ]
    private static let keyClaims = ["assertion_key_id", "assertion_issuer", "assertion_subject", "assertion_audience"]

    /// Reads the workload identity keys, each checked against the grants and the client
    /// authentication that use it.
    static func read(_ root: ObjectReader, grants: [Grant]?, clientAuth: ClientAuthentication) -> WorkloadIdentity {
        var workload = WorkloadIdentity()
        func path(_ key: String) -> String? {
            guard let path = root.string(key) else { return nil }
            guard path.hasPrefix("/") else {
                root.add(key, "must be an absolute path, found \"\(path.prefix(200))\"")
                return nil
            }
            return path
        }
        let listed = { (grant: Grant) in grants?.contains(grant) == true }

        workload.clientAssertionFile = path("client_assertion_file")
        if clientAuth == .clientAssertionFile, workload.clientAssertionFile == nil, !root.contains("client_assertion_file") {
            root.add("client_assertion_file", "required when client_auth is \"client_assertion_file\": the file the platform writes its JWT into")
        } else if clientAuth != .clientAssertionFile, root.contains("client_assertion_file") {
            root.add("client_assertion_file", "applies only when client_auth is \"client_assertion_file\", found \"\(clientAuth.rawValue)\"")
        }

        workload.assertionFile = path("assertion_file")
        let keyFile = path("assertion_key_file")
        let claims = keyClaims.map { key -> String? in
            guard let value = root.string(key) else { return nil }
            if value.isEmpty || value.utf8.count > 2048 || value.containsControlCharacters {
                root.add(key, "must be 1–2048 printable characters")
            }
            if !root.contains("assertion_key_file") { root.add(key, "applies only with assertion_key_file") }
            return value
        }
        if let keyFile {
            workload.assertionKey = AssertionKey(file: keyFile, keyID: claims[0], issuer: claims[1], subject: claims[2], audience: claims[3])
        }
        if root.contains("assertion_file"), root.contains("assertion_key_file") {
            root.add("assertion_key_file", "give assertion_file (the platform's JWT) or assertion_key_file (a key to sign assertions with), not both")
        }
        if listed(.jwtBearer) {
            if !root.contains("assertion_file"), !root.contains("assertion_key_file") {
                root.add("grants", "jwt_bearer needs assertion_file (the platform's JWT) or assertion_key_file (a key the daemon signs assertions with)")
            }
        } else {
            for key in ["assertion_file", "assertion_key_file"] where root.contains(key) {
                root.add(key, "applies to the jwt_bearer grant, which grants does not list")
            }
        }

        workload.subjectTokenFile = path("subject_token_file")
        if let type = root.string("subject_token_type") {
            if subjectTokenTypes.contains(type) {
                workload.subjectTokenType = type
            } else {
                let allowed = subjectTokenTypes.map { "\"\($0)\"" }.joined(separator: ", ")
                root.add("subject_token_type", "must be one of \(allowed), found \"\(type.prefix(200))\"")
            }
            if !root.contains("subject_token_file") { root.add("subject_token_type", "applies only with subject_token_file") }
        }
        if listed(.tokenExchange), !root.contains("subject_token_file") {
            root.add("grants", "token_exchange needs subject_token_file: the platform's token to exchange for the provider's")
        } else if !listed(.tokenExchange), root.contains("subject_token_file") {
            root.add("subject_token_file", "applies to the token_exchange grant, which grants does not list")
        }
        return workload
    }
}
