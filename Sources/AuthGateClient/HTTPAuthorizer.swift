public import AuthGateCore
public import AuthGateRPC
import Crypto
import FoundationEssentials
import Synchronization

/// Authorizes HTTP requests with a session's tokens, for programs that send them with
/// URLSession, AsyncHTTPClient or any other HTTP library, and retries the answers worth it
/// (the rule of the Python client's auth classes, ``HTTPRetryPolicy``).
///
/// ```swift
/// let authorizer = HTTPAuthorizer(client: AuthGateClient(), provider: "corp")
/// let data = try await authorizer.send(method: "GET", url: url.absoluteString) { authorized in
///     var request = URLRequest(url: url)
///     for (name, value) in authorized.headers { request.setValue(value, forHTTPHeaderField: name) }
///     let (data, response) = try await session.data(for: request)   // a session with SameOriginRedirects
///     let http = response as! HTTPURLResponse
///     return (data, HTTPAnswer(status: http.statusCode, url: http.url?.absoluteString,
///                              headers: http.allHeaderFields as? [String: String] ?? [:]))
/// }
/// ```
///
/// URLSession on Linux follows a redirect to another origin with the headers set here: give
/// it a delegate that refuses those (docs/INTEGRATIONS.md, `SameOriginRedirects`).
///
/// Or step by step: ``authorize(method:url:)`` gives a request's headers, and
/// ``retry(_:after:)`` the headers to send it again with, or `nil` when its answer is final.
/// One authorizer per session and API client: it remembers each origin's DPoP nonce and the
/// tokens the API refused.
public final class HTTPAuthorizer: Sendable {
    public let client: AuthGateClient
    public let provider: String
    public let session: String?
    /// The least validity a token sent gets (the daemon refreshes it first when needed).
    public let minimumValidity: Int?
    private let policy = Mutex(HTTPRetryPolicy())
    private typealias ReportOutcome = Result<TokenResult, AuthGateClientError>
    /// The `token.rejected` calls under way, by the refused token's digest: the requests
    /// waiting for their answer.
    private let reports = Mutex<[[UInt8]: [CheckedContinuation<ReportOutcome?, Never>]]>([:])

    /// The token the requests get instead of the session's own: exchanged (RFC 8693) for an
    /// audience or a resource, or narrowed to fewer scopes; `nil` for the session's token.
    public let variant: TokenVariantChoice?

    /// - Parameters:
    ///   - client: The daemon's client.
    ///   - provider: The provider of the session whose tokens authorize the requests.
    ///   - session: The session's name; the default session when `nil`.
    ///   - minimumValidity: Seconds a token must still be valid when it is sent (default 30).
    ///   - variant: A token for an audience, a resource or fewer scopes (`token.exchange`,
    ///     cached by the daemon per combination) instead of the session's own.
    public init(client: AuthGateClient, provider: String, session: String? = nil, minimumValidity: Int? = 30, variant: TokenVariantChoice? = nil) {
        self.client = client
        self.provider = provider
        self.session = session
        self.minimumValidity = minimumValidity
        self.variant = variant
    }

    /// The token to send: the session's, or the variant's.
    private func currentToken() async throws(AuthGateClientError) -> TokenResult {
        guard let variant else { return try await client.token(provider: provider, session: session, minimumValidity: minimumValidity) }
        return try await client.call(
            .tokenExchange,
            variant.params(provider: provider, session: session, minimumValidity: minimumValidity),
            as: TokenResult.self
        )
    }

    /// The API refused `token`: the session's is reported (`token.rejected`, a refresh for
    /// every caller); a variant is exchanged again.
    private func replacement(for token: Secret) async throws(AuthGateClientError) -> TokenResult {
        guard let variant else { return try await client.tokenRejected(provider: provider, accessToken: token, session: session) }
        var params = variant.params(provider: provider, session: session, minimumValidity: minimumValidity)
        params.forceRefresh = true
        return try await client.call(.tokenExchange, params, as: TokenResult.self)
    }

    /// The headers of one request: `Authorization` with the session's token, and for a
    /// DPoP-bound token a `DPoP` proof of this method and URL, with the nonce last heard from
    /// its origin. Throws ``AuthGateClientError`` with `validation_failed` for a URL that is not
    /// absolute http(s).
    public func authorize(method: String, url: String) async throws(AuthGateClientError) -> AuthorizedRequest {
        guard let origin = HTTPOrigin(url: url) else { throw AuthGateClientError.invalidURL() }
        let token = try await currentToken()
        return try await authorized(method: method, url: url, origin: origin, token: token, nonce: policy.withLock { $0.nonce(for: origin) })
    }

    /// ``authorize(method:url:)`` with a token the caller has already (one it follows with
    /// ``AuthGateClient/follow(provider:session:minimumValidity:)``): no token call, and for a
    /// DPoP-bound token only the proof is asked for.
    public func authorize(method: String, url: String, token: TokenResult) async throws(AuthGateClientError) -> AuthorizedRequest {
        guard let origin = HTTPOrigin(url: url) else { throw AuthGateClientError.invalidURL() }
        return try await authorized(method: method, url: url, origin: origin, token: token, nonce: policy.withLock { $0.nonce(for: origin) })
    }

    /// What to do with `answer` to `request`: the request's headers for sending it once more, or
    /// `nil` to hand the answer back as it is (``HTTPRetryPolicy`` says which answers are worth a
    /// retry). Only an answer from the origin `request` was authorized for is looked at.
    public func retry(_ request: AuthorizedRequest, after answer: HTTPAnswer) async throws(AuthGateClientError) -> AuthorizedRequest? {
        try await retry(request, as: decision(after: answer, to: request))
    }

    /// ``retry(_:after:)``'s first half, which waits for nothing: whether `answer` may be worth
    /// sending `request` again (anything but ``HTTPRetryPolicy/Decision/handBack``); remembers a
    /// DPoP nonce the answer brings. A proxy passes a `handBack` answer on as it streams.
    public func decision(after answer: HTTPAnswer, to request: AuthorizedRequest) -> HTTPRetryPolicy.Decision {
        policy.withLock { $0.decide(answer, to: request) }
    }

    /// ``retry(_:after:)``'s second half, for the decision ``decision(after:to:)`` gave.
    public func retry(_ request: AuthorizedRequest, as decision: HTTPRetryPolicy.Decision) async throws(AuthGateClientError) -> AuthorizedRequest? {
        switch decision {
        case .handBack:
            return nil
        case .retryWithNonce(let nonce):
            var again = try await authorized(method: request.method, url: request.url, origin: request.origin, token: request.token, nonce: nonce)
            again.nonceRetried = true
            again.tokenRetried = request.tokenRetried
            return again
        case .replaceToken:
            let refused = request.token.accessToken
            let current: TokenResult
            switch policy.withLock({ $0.refused(refused) }) {
            case .giveUp:
                return nil
            case .report:
                current = try await report(refused).get()
            case .takeCurrent:
                current = try await currentToken()
            }
            guard policy.withLock({ $0.worthRetrying(current.accessToken, after: refused) }) else { return nil }
            var again = try await authorized(
                method: request.method,
                url: request.url,
                origin: request.origin,
                token: current,
                nonce: policy.withLock { $0.nonce(for: request.origin) }
            )
            again.nonceRetried = request.nonceRetried
            again.tokenRetried = true
            return again
        }
    }

    /// Sends a request through `send` with its headers, and again while ``retry(_:after:)``
    /// says so (at most twice more: once for a nonce, once with a new token). Returns what
    /// `send` returned for the last answer.
    /// - Parameter send: Sends the request with `authorized.headers` added and returns the
    ///   response and what the policy needs of it.
    public func send<Response>(
        method: String,
        url: String,
        _ send: (AuthorizedRequest) async throws -> (Response, HTTPAnswer)
    ) async throws -> Response {
        var request = try await authorize(method: method, url: url)
        while true {
            let (response, answer) = try await send(request)
            guard let again = try await retry(request, after: answer) else { return response }
            request = again
        }
    }

    /// Tells the daemon that the API refused `token` (`token.rejected`), once for all the
    /// requests that hold it at the moment: the first makes the call, and those that get their
    /// 401 while it is under way wait for its answer.
    private func report(_ token: Secret) async -> ReportOutcome {
        let key = HTTPRetryPolicy.digest(token)
        let joined: ReportOutcome? = await withCheckedContinuation { continuation in
            let first = reports.withLock { reports in
                guard reports[key] == nil else {
                    reports[key]?.append(continuation)
                    return false
                }
                reports[key] = []
                return true
            }
            if first { continuation.resume(returning: nil) }
        }
        if let joined { return joined }
        let outcome: ReportOutcome
        do throws(AuthGateClientError) {
            outcome = .success(try await replacement(for: token))
        } catch {
            outcome = .failure(error)
        }
        policy.withLock { $0.reported(token) }
        for waiting in reports.withLock({ $0.removeValue(forKey: key) ?? [] }) {
            waiting.resume(returning: outcome)
        }
        return outcome
    }

    private func authorized(
        method: String,
        url: String,
        origin: HTTPOrigin,
        token: TokenResult,
        nonce: String?
    ) async throws(AuthGateClientError) -> AuthorizedRequest {
        var proof: String?
        if token.isDPoP {
            proof = try await client.call(
                .dpopProof,
                DPoPProofParams(
                    provider: provider,
                    session: session,
                    htm: method.uppercased(),
                    htu: url,
                    nonce: nonce,
                    accessToken: token.accessToken
                ),
                as: DPoPProofResult.self
            ).proof
        }
        return AuthorizedRequest(method: method, url: url, origin: origin, token: token, proof: proof)
    }
}

/// A token for an audience, a resource or fewer scopes than the session's (`token.exchange`:
/// RFC 8693 token exchange, or a refresh narrowed by RFC 8707 `resource` and `scope`).
public struct TokenVariantChoice: Sendable, Hashable {
    /// The logical name of the service the token is for (RFC 8693 §2.1 `audience`).
    public var audience: String?
    /// The resource server's URI (RFC 8707).
    public var resource: String?
    public var scopes: [String]?

    public init(audience: String? = nil, resource: String? = nil, scopes: [String]? = nil) {
        self.audience = audience
        self.resource = resource
        self.scopes = scopes
    }

    func params(provider: String, session: String?, minimumValidity: Int?) -> TokenExchangeParams {
        TokenExchangeParams(provider: provider, session: session, audience: audience, resource: resource, scopes: scopes, minValidSeconds: minimumValidity)
    }
}

/// A request's authorization: the headers to send it with, and what ``HTTPAuthorizer`` needs
/// to judge its answer.
public struct AuthorizedRequest: Sendable {
    public var method: String
    public var url: String
    /// Where `url` points: the only origin whose answers are retried.
    public var origin: HTTPOrigin
    /// The token sent (its `description` is `<redacted>`).
    public var token: TokenResult
    /// The DPoP proof sent, for a DPoP-bound token.
    public var proof: String?
    /// Whether this is the retry with a server's DPoP nonce.
    public var nonceRetried = false
    /// Whether this is the retry with a new token after the API refused one.
    public var tokenRetried = false

    public init(method: String, url: String, origin: HTTPOrigin, token: TokenResult, proof: String?) {
        self.method = method
        self.url = url
        self.origin = origin
        self.token = token
        self.proof = proof
    }

    /// `Authorization: <type> <token>`, and `DPoP: <proof>` for a DPoP-bound token.
    public var headers: [(name: String, value: String)] {
        var headers = [(name: "Authorization", value: "\(token.tokenType) \(token.accessToken.exposedValue)")]
        if let proof { headers.append((name: "DPoP", value: proof)) }
        return headers
    }
}

/// What the policy needs of an HTTP answer.
public struct HTTPAnswer: Sendable {
    public var status: Int
    /// The URL that answered (after redirects, the last one); `nil` for the URL sent.
    public var url: String?
    private var fields: [String: String]

    /// - Parameter headers: The answer's header fields (names in any case).
    public init(status: Int, url: String? = nil, headers: [String: String] = [:]) {
        self.status = status
        self.url = url
        fields = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// A header field's value, by a name in any case.
    public func header(_ name: String) -> String? { fields[name.lowercased()] }
}

/// The scheme, host and port of a URL: what a token is authorized for. Compared with the
/// scheme and host in lower case and the scheme's default port filled in, so
/// `https://API.example.com/` and `https://api.example.com:443/x` are one origin.
public struct HTTPOrigin: Hashable, Sendable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int

    /// `nil` unless `url` is an absolute http or https URL with a host.
    public init?(url: String) {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = parsed.host(percentEncoded: false)?.lowercased(), !host.isEmpty
        else { return nil }
        self.scheme = scheme
        self.host = host
        port = parsed.port ?? (scheme == "https" ? 443 : 80)
    }

    public var description: String { "\(scheme)://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\(port)" }
}

/// Which answers to an authorized request are worth sending it again, and with what; the
/// state it keeps for that (each origin's DPoP nonce, the tokens an API refused). Pure: no
/// I/O, so the rule is tested in process; ``HTTPAuthorizer`` makes the daemon calls it asks for.
///
/// The rule, the Python client's (`clients/python/authgate_client/_auth.py`):
/// - An answer from another origin than the one the request was authorized for (a redirect
///   elsewhere) is handed back as it is: never a daemon call, never the token re-sent there.
/// - A `DPoP-Nonce` from the origin is remembered for it (RFC 9449 §8, §9).
/// - A 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` and a nonce: sent once more
///   with a proof carrying the nonce (once per request).
/// - Any other 401: the daemon hears once per token that the API refused it (`token.rejected`,
///   which refreshes the session once for every caller; requests refused while the report is
///   under way join it) and the request is sent once more with the token it answers; a later
///   401 to a token already reported takes the current token without telling the daemon again; a token refused even as the fresh one is not retried.
///   An API that refuses everything costs one refresh per token, not one per request, and
///   never a loop.
public struct HTTPRetryPolicy: Sendable {
    /// How many origins' nonces and refused tokens are remembered (the oldest are forgotten).
    public static let remembered = 256

    public enum Decision: Sendable, Equatable {
        /// The answer is final.
        case handBack
        /// Send again with a proof carrying this nonce.
        case retryWithNonce(String)
        /// The API refused the token: ask ``refused(_:)`` what to do.
        case replaceToken
    }

    public enum Replacement: Sendable, Equatable {
        /// Tell the daemon (`token.rejected`; or join the report under way) and retry with the
        /// token it answers; then call ``reported(_:)``.
        case report
        /// Reported already: retry with the session's current token.
        case takeCurrent
        /// Refused even as the fresh token: no retry.
        case giveUp
    }

    private enum Verdict {
        case reporting, reported, refused
    }

    private var nonces = Bounded<HTTPOrigin, String>()
    /// SHA-256 of a refused token → what became of it: the policy never keeps a token.
    private var verdicts = Bounded<[UInt8], Verdict>()

    public init() {}

    /// The nonce last heard from `origin`.
    public func nonce(for origin: HTTPOrigin) -> String? { nonces[origin] }

    /// What to do with `answer` to `request`; remembers a DPoP nonce the origin sent.
    public mutating func decide(_ answer: HTTPAnswer, to request: AuthorizedRequest) -> Decision {
        guard HTTPOrigin(url: answer.url ?? request.url) == request.origin else { return .handBack }
        var fresh: String?
        if request.token.isDPoP, let nonce = answer.header("DPoP-Nonce"), DPoPKey.isValidNonce(nonce) {
            nonces[request.origin] = nonce
            fresh = nonce
        }
        guard answer.status == 401 else { return .handBack }
        if let fresh, Self.asksForNonce(answer.header("WWW-Authenticate")) {
            return request.nonceRetried ? .handBack : .retryWithNonce(fresh)
        }
        if request.tokenRetried {
            verdicts[Self.digest(request.token.accessToken)] = .refused
            return .handBack
        }
        return .replaceToken
    }

    /// What to do after the API refused `token` (a ``Decision/replaceToken``).
    public mutating func refused(_ token: Secret) -> Replacement {
        let key = Self.digest(token)
        switch verdicts[key] {
        case .refused: return .giveUp
        case .reported: return .takeCurrent
        case .reporting: return .report
        case nil:
            verdicts[key] = .reporting
            return .report
        }
    }

    /// The daemon has answered the report of `token`: later 401s to it take the current token.
    public mutating func reported(_ token: Secret) {
        let key = Self.digest(token)
        if verdicts[key] == .reporting { verdicts[key] = .reported }
    }

    /// Whether `current`, the token the daemon answered after `refused` was reported, is worth
    /// a retry: not when it is the refused one, nor one refused before.
    public func worthRetrying(_ current: Secret, after refused: Secret) -> Bool {
        current != refused && verdicts[Self.digest(current)] != .refused
    }

    /// Whether a `WWW-Authenticate` value is DPoP's `error="use_dpop_nonce"` (RFC 9449 §9):
    /// the `DPoP` scheme and an `error` parameter of that value, quoted or not, in any case.
    public static func asksForNonce(_ challenge: String?) -> Bool {
        guard var lowered = challenge?.lowercased() else { return false }
        let words = lowered.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," })
        guard words.contains("dpop") else { return false }
        for spaced in [" =", "\t=", "= ", "=\t"] {
            while lowered.contains(spaced) { lowered = lowered.replacing(spaced, with: "=") }
        }
        return lowered.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," || $0 == ";" })
            .contains { $0.filter { $0 != "\"" } == "error=use_dpop_nonce" }
    }

    static func digest(_ token: Secret) -> [UInt8] { Array(SHA256.hash(data: Array(token.exposedValue.utf8))) }
}

/// A dictionary that forgets its oldest entries past ``HTTPRetryPolicy/remembered``.
private struct Bounded<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private var values: [Key: Value] = [:]
    private var order: [Key] = []

    subscript(key: Key) -> Value? {
        get { values[key] }
        set {
            guard let newValue else {
                if values.removeValue(forKey: key) != nil { order.removeAll { $0 == key } }
                return
            }
            if values.updateValue(newValue, forKey: key) == nil { order.append(key) }
            while order.count > HTTPRetryPolicy.remembered {
                values[order.removeFirst()] = nil
            }
        }
    }
}

extension TokenResult {
    /// Whether the token is DPoP-bound (RFC 9449 `token_type` `DPoP`).
    public var isDPoP: Bool { tokenType.lowercased() == "dpop" }
}

extension AuthGateClientError {
    /// `validation_failed`: the URL names no origin a token could be authorized for. The URL
    /// is left out of the sentence: its query may hold a secret.
    static func invalidURL() -> AuthGateClientError {
        var error = AuthGateClientError(.protocolError(""))
        error.reason = .validationFailed
        error.message = "A request to authorize needs an absolute http or https URL with a host."
        return error
    }
}
