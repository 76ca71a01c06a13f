public import AuthGateCore
public import AuthGateRPC
import Dispatch
import FoundationEssentials
import Synchronization

/// A client of authgated for Swift programs: tokens without socket code.
///
/// ```swift
/// let client = AuthGateClient()                    // $AUTHGATE_SOCKET, the per-user daemon, the system one
/// let token = try await client.token(provider: "corp", minimumValidity: 60).accessToken
/// ```
///
/// Each call is one JSON-RPC request on a connection of its own. The async calls run the
/// blocking exchange on a Dispatch thread, not on the caller's executor: a refresh at a slow
/// provider may take seconds. `authgate` (the CLI) makes its calls through ``callBlocking(_:_:as:)``:
/// one client implementation, not two.
public struct AuthGateClient: Sendable {
    /// The daemon's socket.
    public let socketPath: String

    /// - Parameter socketPath: The daemon's socket; by default where the CLI finds it.
    public init(socketPath: String? = nil) {
        self.socketPath = socketPath ?? SocketLocation.forClient()
    }

    // MARK: Calls

    /// A token valid for at least `minimumValidity` seconds (the daemon's default: 10), refreshed first when needed.
    public func token(provider: String, session: String? = nil, minimumValidity: Int? = nil) async throws(AuthGateClientError) -> TokenResult {
        try await call(.token, TokenParams(provider: provider, session: session, minValidSeconds: minimumValidity), as: TokenResult.self)
    }

    /// The headers that authorize one request: `Authorization` with the token, and for a DPoP
    /// session (RFC 9449) a `DPoP` proof for this method and URL, signed by the daemon with the
    /// session's key, which this program never sees.
    ///
    /// ```swift
    /// for (name, value) in try await client.authorizationHeaders(provider: "corp", method: "GET", url: url) {
    ///     request.setValue(value, forHTTPHeaderField: name)
    /// }
    /// ```
    public func authorizationHeaders(
        provider: String,
        session: String? = nil,
        method: String,
        url: String,
        nonce: String? = nil
    ) async throws(AuthGateClientError) -> [(name: String, value: String)] {
        let token = try await self.token(provider: provider, session: session)
        var headers = [(name: "Authorization", value: "\(token.tokenType) \(token.accessToken.exposedValue)")]
        if token.tokenType == "DPoP" {
            let proof = try await call(
                .dpopProof,
                DPoPProofParams(
                    provider: provider,
                    session: session,
                    htm: method,
                    htu: url,
                    nonce: nonce,
                    accessToken: token.accessToken
                ),
                as: DPoPProofResult.self
            )
            headers.append((name: "DPoP", value: proof.proof))
        }
        return headers
    }

    /// A token exchanged for the session's (RFC 8693): for `audience`, a `resource`, or fewer
    /// `scopes`; cached by the daemon per combination and exchanged again before it expires.
    public func exchange(
        provider: String,
        session: String? = nil,
        audience: String? = nil,
        resource: String? = nil,
        scopes: [String]? = nil,
        requestedTokenType: String? = nil
    ) async throws(AuthGateClientError) -> TokenResult {
        try await call(
            .tokenExchange,
            TokenExchangeParams(
                provider: provider,
                session: session,
                audience: audience,
                resource: resource,
                scopes: scopes,
                requestedTokenType: requestedTokenType
            ),
            as: TokenResult.self
        )
    }

    /// The API refused `accessToken`: a new token when it was the current one (the session is
    /// refreshed once for every caller), else the current one.
    public func tokenRejected(provider: String, accessToken: Secret, session: String? = nil) async throws(AuthGateClientError) -> TokenResult {
        try await call(.tokenRejected, TokenRejectedParams(provider: provider, session: session, accessToken: accessToken), as: TokenResult.self)
    }

    /// The providers the caller may use.
    public func providers() async throws(AuthGateClientError) -> [ProviderInfo] {
        try await call(.providersList, EmptyResult(), as: [ProviderInfo].self)
    }

    /// The caller's sessions (never a token).
    public func status(provider: String? = nil) async throws(AuthGateClientError) -> [SessionStatus] {
        try await call(.status, StatusParams(provider: provider), as: [SessionStatus].self)
    }

    /// Any method, asynchronously.
    public func call<Params: Encodable & Sendable, Result: Decodable & Sendable>(
        _ method: RPCMethod,
        _ params: Params,
        as: Result.Type = Result.self
    ) async throws(AuthGateClientError) -> Result {
        let outcome: Swift.Result<Result, RPCClientError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(RPCClientError) {
                    continuation.resume(returning: .success(try callBlocking(method, params, as: Result.self)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        do {
            return try outcome.get()
        } catch {
            throw AuthGateClientError(error)
        }
    }

    /// Any method, on the calling thread (the CLI's way: it has nothing else to do meanwhile).
    public func callBlocking<Params: Encodable, Result: Decodable>(
        _ method: RPCMethod,
        _ params: Params,
        as: Result.Type = Result.self
    ) throws(RPCClientError) -> Result {
        try RPCConnection(path: socketPath).call(method, params, as: Result.self)
    }
}

/// Why a call failed: the daemon's stable reason and sentence, or that it could not be
/// reached or answered nonsense.
public struct AuthGateClientError: Error, Sendable, CustomStringConvertible {
    /// The daemon's reason (`login_required`, `unknown_provider`, …); `nil` when the daemon
    /// did not answer (``isDaemonUnreachable``) or answered nonsense.
    public var reason: ErrorReason?
    public var message: String
    /// When to try again, for `rate_limited` and provider outages.
    public var retryAfterSeconds: Int?
    /// Nothing answers on the socket (no daemon, or no permission).
    public var isDaemonUnreachable: Bool

    public init(_ error: RPCClientError) {
        switch error {
        case .remote(let remote):
            reason = remote.reason
            message = remote.description
            retryAfterSeconds = remote.data?.retryAfterSeconds
            isDaemonUnreachable = false
        case .daemonUnreachable:
            reason = nil
            message = error.description
            isDaemonUnreachable = true
        case .protocolError:
            reason = nil
            message = error.description
            isDaemonUnreachable = false
        }
    }

    public var description: String { reason.map { "\(message) [\($0.rawValue)]" } ?? message }
}

// MARK: Watching a session's token

/// What a watch delivers (RPC `token.watch`).
public enum TokenWatchEvent: Sendable {
    /// The session's token: at once, then each time it changes (a refresh, a new sign-in).
    case token(TokenResult)
    /// The session ended; the watch goes on, and a new sign-in is a ``token(_:)`` again.
    case ended(SessionEnded)
}

extension AuthGateClient {
    /// The session's token now, then every new one as the daemon refreshes it, without polling.
    ///
    /// ```swift
    /// for try await event in client.watch(provider: "corp") {
    ///     if case .token(let token) = event { use(token.accessToken) }
    /// }
    /// ```
    ///
    /// The sequence ends when the daemon closes the connection (a restart; watch again), and
    /// throws when the watch is refused (the daemon's reason in ``AuthGateClientError``).
    /// Cancelling the consuming task, or dropping the sequence, closes the connection.
    /// - Parameter waitForSignIn: A session that does not exist yet is waited for instead of
    ///   refused with `login_required`: the first event is its sign-in's token, as it happens.
    public func watch(
        provider: String,
        session: String? = nil,
        minimumValidity: Int? = nil,
        waitForSignIn: Bool = false
    ) -> AsyncThrowingStream<TokenWatchEvent, any Error> {
        let params = TokenParams(
            provider: provider,
            session: session,
            minValidSeconds: minimumValidity,
            waitForSignIn: waitForSignIn ? true : nil
        )
        let socketPath = socketPath
        return Self.stream { stop, yield throws(RPCClientError) in
            let connection = try RPCConnection(path: socketPath)
            guard stop.attach(connection.interrupter) else { return }
            defer { stop.detach() }
            try AuthGateClient.watchBlocking(on: connection, params, yield)
        }
    }

    /// ``watch(provider:session:minimumValidity:waitForSignIn:)`` that goes on across daemon
    /// restarts, sign-outs and outages (``TokenFollower``): the token now, then each new one,
    /// with ``TokenFollower/Event/unavailable(reason:message:)`` while the daemon cannot give one.
    ///
    /// ```swift
    /// for try await event in client.follow(provider: "corp") {
    ///     if case .token(let token) = event { use(token.accessToken) }
    /// }
    /// ```
    ///
    /// It throws only for what waiting cannot mend (an unknown provider, not allowed).
    /// Cancelling the consuming task, or dropping the sequence, stops it.
    public func follow(
        provider: String,
        session: String? = nil,
        minimumValidity: Int? = nil
    ) -> AsyncThrowingStream<TokenFollower.Event, any Error> {
        let follower = TokenFollower(
            socketPath: socketPath,
            params: TokenParams(provider: provider, session: session, minValidSeconds: minimumValidity)
        )
        return Self.stream { stop, yield throws(RPCClientError) in try follower.run(stop: stop, yield) }
    }

    /// Runs `produce` on a Dispatch thread as an async sequence of the events it hands its
    /// second argument, which says whether to go on; ending the sequence (the consuming task
    /// cancelled, the sequence dropped) stops it through the ``FollowStop`` it is given.
    private static func stream<Event: Sendable>(
        _ produce: @escaping @Sendable (FollowStop, (Event) -> Bool) throws(RPCClientError) -> Void
    ) -> AsyncThrowingStream<Event, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Event, any Error>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let stop = FollowStop()
        continuation.onTermination = { _ in stop.stop() }
        DispatchQueue.global().async {
            do throws(RPCClientError) {
                try produce(stop) { event in
                    continuation.yield(event)
                    return !stop.isStopped
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: AuthGateClientError(error))
            }
        }
        return stream
    }

    /// A watch on the calling thread: `handle` gets each event and says whether to go on.
    /// Returns when the daemon closes the connection or `handle` says stop. ``TokenFollower``
    /// runs this; ``watch(provider:session:minimumValidity:waitForSignIn:)`` runs it on a Dispatch thread.
    static func watchBlocking(
        on connection: RPCConnection,
        _ params: TokenParams,
        _ handle: (TokenWatchEvent) -> Bool
    ) throws(RPCClientError) {
        let encoded = (try? RPCCoding.makeEncoder().encode(params)) ?? Data("{}".utf8)
        try connection.send(RPCLine.request(.tokenWatch, encodedParams: encoded))
        // The answer comes before any notification of this watch.
        guard let reply = try connection.receiveLine() else { throw .protocolError("the daemon closed the connection") }
        guard handle(.token(try RPCConnection.decodeReply(reply, id: RPCLine.clientID, as: TokenResult.self))) else { return }
        let decoder = RPCCoding.makeDecoder()
        while let line = try connection.receiveLine() {
            let event: TokenWatchEvent
            switch (try? decoder.decode(NotificationMethod.self, from: Data(line)))?.method {
            case TokenChanged.method:
                guard let change = try? decoder.decode(RPCNotification<TokenChanged>.self, from: Data(line)).params else { continue }
                event = .token(
                    TokenResult(
                        accessToken: change.accessToken,
                        tokenType: change.tokenType,
                        expiresAt: change.expiresAt,
                        scopes: change.scopes,
                        idToken: nil
                    )
                )
            case SessionEnded.method:
                guard let ended = try? decoder.decode(RPCNotification<SessionEnded>.self, from: Data(line)).params else { continue }
                event = .ended(ended)
            default:
                continue
            }
            guard handle(event) else { return }
        }
    }

    private struct NotificationMethod: Decodable {
        var method: String?
    }
}
