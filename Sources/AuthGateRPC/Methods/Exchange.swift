public import AuthGateCore

// The params of `token.exchange` and `dpop.proof` (docs/RPC.md); their results are a
// `TokenResult` and a `DPoPProofResult`.

/// `token.exchange` params: the session's access token exchanged (RFC 8693) for one with
/// another audience or resource, or fewer scopes; cached per combination, like the variants.
public struct TokenExchangeParams: Sendable, Codable {
    public var provider: String
    public var session: String?
    /// The logical name of the service the token is for (RFC 8693 §2.1 `audience`).
    public var audience: String?
    /// The resource server's URI (RFC 8693 §2.1, RFC 8707).
    public var resource: String?
    public var scopes: [String]?
    /// A token type URI; the provider's default (an access token) when absent.
    public var requestedTokenType: String?
    public var minValidSeconds: Int?
    public var forceRefresh: Bool?

    public init(
        provider: String,
        session: String? = nil,
        audience: String? = nil,
        resource: String? = nil,
        scopes: [String]? = nil,
        requestedTokenType: String? = nil,
        minValidSeconds: Int? = nil,
        forceRefresh: Bool? = nil
    ) {
        self.provider = provider
        self.session = session
        self.audience = audience
        self.resource = resource
        self.scopes = scopes
        self.requestedTokenType = requestedTokenType
        self.minValidSeconds = minValidSeconds
        self.forceRefresh = forceRefresh
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, audience, resource, scopes
        case requestedTokenType = "requested_token_type"
        case minValidSeconds = "min_valid_seconds"
        case forceRefresh = "force_refresh"
    }
}

/// `dpop.proof` params: a DPoP proof (RFC 9449 §4) for the caller's own request to an API,
/// signed with the session's key, which never leaves the daemon.
public struct DPoPProofParams: Sendable, Codable {
    public var provider: String
    public var session: String?
    /// The request's method (`htm`), e.g. `GET`.
    public var htm: String
    /// The request's URL (`htu`); its query and fragment are left out of the proof.
    public var htu: String
    /// The resource server's `DPoP-Nonce`, when it asked for one.
    public var nonce: String?
    /// The token the request presents (the session's own or one of its variants); the
    /// session's current token when absent. Its hash becomes the proof's `ath`.
    public var accessToken: Secret?

    public init(provider: String, session: String? = nil, htm: String, htu: String, nonce: String? = nil, accessToken: Secret? = nil) {
        self.provider = provider
        self.session = session
        self.htm = htm
        self.htu = htu
        self.nonce = nonce
        self.accessToken = accessToken
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, htm, htu, nonce
        case accessToken = "access_token"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        provider = try container.decode(String.self, forKey: .provider)
        session = try container.decodeIfPresent(String.self, forKey: .session)
        htm = try container.decode(String.self, forKey: .htm)
        htu = try container.decode(String.self, forKey: .htu)
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
        accessToken = try container.decodeIfPresent(String.self, forKey: .accessToken).map(Secret.init)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(provider, forKey: .provider)
        try container.encodeIfPresent(session, forKey: .session)
        try container.encode(htm, forKey: .htm)
        try container.encode(htu, forKey: .htu)
        try container.encodeIfPresent(nonce, forKey: .nonce)
        try container.encodeIfPresent(accessToken?.exposedValue, forKey: .accessToken)
    }
}

/// `dpop.proof` result.
public struct DPoPProofResult: Sendable, Codable {
    /// The `DPoP` header's value: a proof JWT, good for this one request.
    public var proof: String
    /// The key's JWK thumbprint (RFC 7638), the bound tokens' `cnf.jkt`.
    public var jkt: String

    public init(proof: String, jkt: String) {
        self.proof = proof
        self.jkt = jkt
    }
}
