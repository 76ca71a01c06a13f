public import AuthGateCore
public import AuthGateRPC
import Dispatch

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
        _ method: RPCMethod, _ params: Params, as: Result.Type = Result.self) async throws(AuthGateClientError) -> Result {
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
    public func callBlocking<Params: Encodable, Result: Decodable>(_ method: RPCMethod, _ params: Params,
                                                                  as: Result.Type = Result.self) throws(RPCClientError) -> Result {
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
