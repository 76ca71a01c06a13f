import AuthGateClient
import AuthGateCore
import AuthGateHTTP
import Dispatch
import FoundationEssentials
import Synchronization

/// One forwarded request, on one of the proxy's exchange threads (libcurl blocks).
///
/// The session's headers come from ``HTTPAuthorizer`` (the token from the daemon's cached
/// path; for a DPoP session a proof of this method and URL, signed by the daemon), and its
/// rule decides what an answer is worth: a 401 asking for a DPoP nonce, or one refusing the
/// token, is sent once more — with the nonce, or with the token the daemon answers
/// `token.rejected` with — when the request can be sent again (no body, or a body that has
/// arrived whole and was small enough to be kept: ``RequestBody``). The retried answer's body
/// is dropped; any other answer streams to the client as it comes.
final class ProxyExchange: Sendable {
    private let proxy: ProxyCore
    private let method: String
    private let url: URL
    private let fields: [(name: String, value: String)]
    private let bodyLength: Int64?
    private let client: ClientAnswer

    init(proxy: ProxyCore, method: String, url: URL, fields: [(name: String, value: String)], bodyLength: Int64?, client: ClientAnswer) {
        self.proxy = proxy
        self.method = method
        self.url = url
        self.fields = fields
        self.bodyLength = bodyLength
        self.client = client
    }

    func run() {
        var authorized: AuthorizedRequest
        switch proxy.authorize(method: method, url: url) {
        case .authorized(let value): authorized = value
        case .refused(let answer): return client.answer(answer)
        }
        while true {
            let relay = AnswerRelay(exchange: self, authorized: authorized)
            let request = StreamedRequest(method: method, url: url, headers: fields + authorized.headers, bodyLength: bodyLength)
            do {
                try proxy.streams.perform(request, body: client.body, sink: relay, policy: proxy.streamPolicy)
            } catch {
                if relay.retry == nil {
                    if relay.headSent {
                        client.abort()
                    } else if !client.isGone {
                        proxy.upstreamFailed(error)
                        client.answer(.upstreamFailed(error))
                    }
                    return
                }
            }
            guard let next = relay.retry else {
                client.end()
                return
            }
            proxy.retried(nonce: next.nonceRetried && !authorized.nonceRetried)
            if next.tokenRetried && !authorized.tokenRetried { proxy.tookNew(next.token) }
            authorized = next
            client.body?.rewind()
        }
    }

    /// The answer's head: pass it on, or keep it back for a retry.
    fileprivate func decide(status: Int, fields: [(name: String, value: String)], authorized: AuthorizedRequest) -> AuthorizedRequest? {
        guard let again = proxy.retry(status: status, fields: fields, authorized: authorized), client.body?.isReplayable ?? true else { return nil }
        return again
    }
}

/// The session's headers for a request, or the proxy's answer when it has none.
enum Authorization {
    case authorized(AuthorizedRequest)
    case refused(ProxyAnswer)
}

extension ProxyCore {
    /// The session's headers for a request (on an exchange's thread): the followed token when
    /// it will do, else the daemon's answer; the proxy's own answer when there is none (counted).
    func authorize(method: String, url: URL) -> Authorization {
        let authorizer = authorizer
        let target = url.absoluteString
        let followed = followedToken()
        if let followed, !followed.isDPoP, let origin = upstreamOrigin {
            // The common case costs no call: the daemon pushed this token.
            return .authorized(AuthorizedRequest(method: method, url: target, origin: origin, token: followed, proof: nil))
        }
        let outcome = waitFor { () async throws(AuthGateClientError) in
            if let followed {
                try await authorizer.authorize(method: method, url: target, token: followed)
            } else {
                try await authorizer.authorize(method: method, url: target)
            }
        }
        switch outcome {
        case .success(let value): return .authorized(value)
        case .failure(let error):
            let answer = ProxyAnswer.noToken(error, provider: configuration.provider, session: configuration.session)
            refused(answer)
            return .refused(answer)
        }
    }

    /// HTTPAuthorizer's rule for an answer's head: the request to send once more (with a DPoP
    /// nonce, or the token the daemon answers `token.rejected` with), or `nil` to pass it on.
    func retry(status: Int, fields: [(name: String, value: String)], authorized: AuthorizedRequest) -> AuthorizedRequest? {
        guard status == 401 || fields.contains(where: { $0.name.lowercased() == "dpop-nonce" }) else { return nil }
        var joined: [String: String] = [:]
        for field in fields {
            let name = field.name.lowercased()
            joined[name] = joined[name].map { $0 + ", " + field.value } ?? field.value
        }
        let answer = HTTPAnswer(status: status, url: nil, headers: joined)
        let authorizer = authorizer
        let next = waitFor { () async throws(AuthGateClientError) in try await authorizer.retry(authorized, after: answer) }
        guard case .success(let again?) = next else { return nil }
        return again
    }
}

/// Receives one attempt's answer from libcurl and passes it on, unless it is to be retried.
private final class AnswerRelay: StreamedResponseSink {
    let exchange: ProxyExchange
    let authorized: AuthorizedRequest
    var retry: AuthorizedRequest?
    var headSent = false
    private let client: ClientAnswer

    init(exchange: ProxyExchange, authorized: AuthorizedRequest) {
        self.exchange = exchange
        self.authorized = authorized
        client = exchange.clientAnswer
    }

    func head(status: Int, headers: [(name: String, value: String)]) -> Bool {
        if let again = exchange.decide(status: status, fields: headers, authorized: authorized) {
            retry = again
            return false
        }
        headSent = true
        exchange.answered(status: status)
        client.head(status: status, fields: ForwardingRules.answerFields(headers))
        return true
    }

    func body(_ bytes: UnsafeRawBufferPointer) -> Bool { client.body(bytes) }
}

extension ProxyExchange {
    fileprivate var clientAnswer: ClientAnswer { client }

    fileprivate func answered(status: Int) { proxy.answered(status: status) }
}

/// Waits on this (exchange) thread for an async call of the daemon's client. The task is
/// owned by the wait: it ends before this returns.
private func waitFor<T: Sendable>(_ operation: @escaping @Sendable () async throws(AuthGateClientError) -> T) -> Result<T, AuthGateClientError> {
    let outcome = Mutex<Result<T, AuthGateClientError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result: Result<T, AuthGateClientError>
        do throws(AuthGateClientError) {
            result = .success(try await operation())
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return outcome.withLock { $0! }
}
