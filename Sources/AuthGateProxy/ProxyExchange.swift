import AuthGateClient
import AuthGateCore
import AuthGateHTTP
import AuthGateRPC
import Dispatch
import FoundationEssentials
import Synchronization

/// One forwarded request: its headers from the session, then its exchange with the upstream on
/// the proxy's exchanges' thread (``StreamedExchanges``, libcurl's multi interface), its answer
/// to the client.
///
/// The session's headers come from ``HTTPAuthorizer`` (the followed token at once; otherwise,
/// and for a DPoP session's proof of this method and URL, from the daemon), and its rule decides
/// what an answer is worth: a 401 asking for a DPoP nonce, or one refusing the token, is sent
/// once more — with the nonce, or with the token the daemon answers `token.rejected` with —
/// when the request can be sent again (no body, or a body that has arrived whole and was small
/// enough to be kept: ``RequestBody``). While that is decided the answer waits, paused; a
/// retried answer's body is dropped, any other answer streams to the client as it comes.
final class ProxyExchange: Sendable {
    let proxy: ProxyCore
    private let method: String
    private let url: URL
    private let fields: [(name: String, value: String)]
    private let bodyLength: Int64?
    let client: ClientAnswer

    init(proxy: ProxyCore, method: String, url: URL, fields: [(name: String, value: String)], bodyLength: Int64?, client: ClientAnswer) {
        self.proxy = proxy
        self.method = method
        self.url = url
        self.fields = fields
        self.bodyLength = bodyLength
        self.client = client
    }

    /// Sends the request: at once with the followed token, else after the daemon's answer.
    func start() {
        if let authorized = proxy.authorizeAtOnce(method: method, url: url) { return send(authorized) }
        Task {
            switch await proxy.authorize(method: method, url: url) {
            case .authorized(let authorized): send(authorized)
            case .refused(let answer): client.answer(answer)
            }
        }
    }

    fileprivate func send(_ authorized: AuthorizedRequest) {
        // A client that left while the daemon answered, or while a retry was decided: nothing
        // more is sent upstream under the session's token for it.
        guard !client.isGone else { return }
        let request = StreamedRequest(method: method, url: url, headers: fields + authorized.headers, bodyLength: bodyLength)
        do {
            client.exchangeStarted(
                try proxy.streams.start(request, body: client.body, sink: AnswerRelay(exchange: self, authorized: authorized), policy: proxy.streamPolicy)
            )
        } catch {
            failed(error, headSent: false)
        }
    }

    /// No complete answer came: the proxy's own answer, or a cut connection when the upstream's
    /// head is out already.
    fileprivate func failed(_ error: HTTPTransportError, headSent: Bool) {
        if headSent {
            client.abort()
        } else if !client.isGone {
            proxy.upstreamFailed(error)
            client.answer(.upstreamFailed(error))
        }
    }

    fileprivate func send(_ next: AuthorizedRequest, after previous: AuthorizedRequest) {
        proxy.retried(nonce: next.nonceRetried && !previous.nonceRetried)
        if next.tokenRetried && !previous.tokenRetried { proxy.tookNew(next.token) }
        _ = client.body?.restart()  // it can: the answer relay checked that the body is replayable
        send(next)
    }
}

/// The session's headers for a request, or the proxy's answer when it has none.
enum Authorization {
    case authorized(AuthorizedRequest)
    case refused(ProxyAnswer)
}

extension ProxyCore {
    /// The session's headers with no call, when the followed token will do (a bearer token,
    /// valid for the minimum validity still): the common case.
    func authorizeAtOnce(method: String, url: URL) -> AuthorizedRequest? {
        bearer(followedToken(), method: method, url: url)
    }

    private func bearer(_ followed: TokenResult?, method: String, url: URL) -> AuthorizedRequest? {
        guard let followed, !followed.isDPoP, let origin = upstreamOrigin else { return nil }
        return AuthorizedRequest(method: method, url: url.absoluteString, origin: origin, token: followed, proof: nil)
    }

    /// The session's headers for a request: the followed token when it will do, else the
    /// daemon's answer; the proxy's own answer when there is none (counted).
    func authorize(method: String, url: URL) async -> Authorization {
        let followed = followedToken()
        if let authorized = bearer(followed, method: method, url: url) { return .authorized(authorized) }
        let target = url.absoluteString
        do throws(AuthGateClientError) {
            if let followed {
                return .authorized(try await authorizer.authorize(method: method, url: target, token: followed))
            }
            return .authorized(try await authorizer.authorize(method: method, url: target))
        } catch {
            let answer = ProxyAnswer.noToken(error, provider: configuration.provider, session: configuration.session)
            refused(answer)
            return .refused(answer)
        }
    }

    /// HTTPAuthorizer's rule for an answer's head, the part that waits for nothing: whether it
    /// may be worth sending the request once more (a 401, or an answer bringing a DPoP nonce,
    /// which is remembered); `nil` to pass it on.
    func retryDecision(status: Int, fields: [(name: String, value: String)], authorized: AuthorizedRequest) -> HTTPRetryPolicy.Decision? {
        guard status == 401 || fields.contains(where: { $0.name.lowercased() == "dpop-nonce" }) else { return nil }
        var joined: [String: String] = [:]
        for field in fields {
            let name = field.name.lowercased()
            joined[name] = joined[name].map { $0 + ", " + field.value } ?? field.value
        }
        let decision = authorizer.decision(after: HTTPAnswer(status: status, url: nil, headers: joined), to: authorized)
        return decision == .handBack ? nil : decision
    }

    /// The request to send once more for `decision` (with the nonce, or the token the daemon
    /// answers `token.rejected` with), or `nil` to pass the answer on.
    func retry(_ authorized: AuthorizedRequest, as decision: HTTPRetryPolicy.Decision) async -> AuthorizedRequest? {
        try? await authorizer.retry(authorized, as: decision)
    }
}

/// Receives one attempt's answer on the exchanges' thread and passes it on as it comes, unless
/// it is to be sent again. A head that may be worth a retry is held, and its exchange paused at its first
/// piece of body, while the daemon is asked (on a task); then the answer is dropped and the
/// request sent again, or the head and body go on as they come.
private final class AnswerRelay: StreamedResponseSink, @unchecked Sendable {
    private enum Verdict {
        case passOn
        case deciding
        case retry(AuthorizedRequest)
    }

    private struct Decision {
        var verdict = Verdict.passOn
        /// How the exchange ended, when it ended while the verdict was being decided.
        var outcome: Result<Void, HTTPTransportError>?
        /// The exchange paused for the verdict.
        var paused: StreamedExchange?
    }

    private let exchange: ProxyExchange
    private let authorized: AuthorizedRequest
    private let client: ClientAnswer
    private let decision = Mutex(Decision())
    // The exchanges' thread's, and after `finished` whichever thread concludes (the mutex orders them):
    private var held: (status: Int, fields: [(name: String, value: String)])?
    private var headSent = false

    init(exchange: ProxyExchange, authorized: AuthorizedRequest) {
        self.exchange = exchange
        self.authorized = authorized
        client = exchange.client
    }

    func head(status: Int, headers: [(name: String, value: String)]) {
        let proxy = exchange.proxy
        guard let first = proxy.retryDecision(status: status, fields: headers, authorized: authorized), client.body?.isReplayable ?? true else {
            return passHead(status: status, fields: headers)
        }
        held = (status, headers)
        decision.withLock { $0.verdict = .deciding }
        let authorized = authorized
        Task {
            let next = await proxy.retry(authorized, as: first)
            let (outcome, paused) = decision.withLock { decision in
                decision.verdict = next.map { .retry($0) } ?? .passOn
                return (decision.outcome, decision.paused)
            }
            if let outcome {
                conclude(outcome)
            } else {
                paused?.resume()
            }
        }
    }

    func body(_ bytes: UnsafeRawBufferPointer, exchange streamed: StreamedExchange) -> StreamedTake {
        let verdict = decision.withLock { decision in
            if case .deciding = decision.verdict { decision.paused = streamed }
            if case .retry = decision.verdict, !canSendAgain { decision.verdict = .passOn }
            return decision.verdict
        }
        switch verdict {
        case .deciding: return .later
        case .retry: return .abort  // the rest is dropped: the request goes again
        case .passOn:
            if let held {
                self.held = nil
                passHead(status: held.status, fields: held.fields)
            }
            return client.body(bytes) { streamed.resume() }
        }
    }

    func flush() {
        guard case .passOn = decision.withLock({ $0.verdict }) else { return }
        client.flush()
    }

    func finished(_ outcome: Result<Void, HTTPTransportError>) {
        let deciding = decision.withLock { decision in
            guard case .deciding = decision.verdict else { return false }
            decision.outcome = outcome
            return true
        }
        if !deciding { conclude(outcome) }
    }

    private func conclude(_ outcome: Result<Void, HTTPTransportError>) {
        if case .retry(let next) = decision.withLock({ $0.verdict }), canSendAgain {
            return exchange.send(next, after: authorized)
        }
        if let held {
            self.held = nil
            passHead(status: held.status, fields: held.fields)
        }
        switch outcome {
        case .success: client.end()
        case .failure(let error): exchange.failed(error, headSent: headSent)
        }
    }

    /// Whether the request can still be sent again: the body (if any) was whole and small enough
    /// when the head came, but libcurl may have gone on sending it while the daemon was asked,
    /// past what is kept; then the answer is passed on after all.
    private var canSendAgain: Bool { client.body?.isReplayable ?? true }

    private func passHead(status: Int, fields: [(name: String, value: String)]) {
        headSent = true
        exchange.proxy.answered(status: status)
        client.head(status: status, fields: fields)
    }
}

/// Waits on this thread (a tunnel's) for an async call. The task is owned by the wait: it
/// ends before this returns.
func waitFor<T: Sendable>(_ operation: @escaping @Sendable () async -> T) -> T {
    let outcome = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result = await operation()
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return outcome.withLock { $0! }
}
