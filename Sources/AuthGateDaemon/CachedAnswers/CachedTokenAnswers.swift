import AuthGateCore
import AuthGateRPC
import AuthGateServer
import FoundationEssentials

/// Told of the calls answered from a published token, for the metrics (``DaemonMetrics``
/// observes it): `count` calls of `method` (`token` or `credential.get`), each within
/// `duration`. Called on the hot path: it must cost no more than a few atomic additions.
protocol CachedAnswerObserver: Sendable {
    func cachedAnswers(_ method: RPCMethod, _ count: Int, eachWithin duration: Duration)
}

/// The socket server's ``TokenAnswers``: answers a plain `token` or `credential.get` call for a
/// session's current token where its line was read — on the front door's thread or a handed-on
/// connection's event loop (AuthGateServer) — with no task, no actor and no JSON coder.
///
/// It answers only what needs no decision: a ``PlainTokenRequest`` for a provider in
/// ``OpenProviders`` (usable, no access rules), or for a host whose ``CredentialRoutes`` route
/// names one, whose session has a token in ``PublishedTokens`` that stays valid long enough.
/// Everything else — a refresh, an error, access rules, a host two providers list, other
/// methods — goes the ordinary way through ``RPCDispatcher``, with the same result either way:
/// published tokens are what the session manager would return.
///
/// What it buys (docs/BENCHMARKS.md, "What was optimised"): the cached `token` call is the one
/// every API call of every client makes, and through the dispatcher it costs JSON decoding and
/// encoding, a task and two actor hops.
struct CachedTokenAnswers: TokenAnswers {
    let tokens: PublishedTokens
    let providers: OpenProviders
    /// Counts and times the answers (two atomic additions per answer, or per batch at the front
    /// door, and a histogram update per answer; measured in docs/BENCHMARKS.md); `nil` where
    /// nothing is measured.
    var metrics: (any CachedAnswerObserver)?

    func lookUp<Answer>(
        _ line: UnsafeRawBufferPointer,
        uid: UInt32,
        _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer
    ) -> (answer: Answer, validUntil: Date, method: RPCMethod)? {
        guard let request = PlainTokenRequest(line) else { return nil }
        let minimumValidity = request.minimumValidity ?? TokenParams.defaultMinimumValidity
        switch request.target {
        case .session(let provider, let session):
            guard providers.contains(provider),
                let found = tokens.result(
                    for: PublishedTokens.Key(uid: uid, provider: provider, session: session ?? SessionName.default.rawValue),
                    minimumValidity: minimumValidity
                )
            else { return nil }
            return (write(request.id, found.result), found.validUntil, .token)
        case .credential(let host, let tool):
            guard let route = providers.credentialRoute(host: host, tool: tool),
                let found = tokens.result(
                    for: PublishedTokens.Key(uid: uid, provider: route.provider, session: SessionName.default.rawValue),
                    minimumValidity: minimumValidity
                )
            else { return nil }
            return (write(request.id, route.result(token: found.result)), found.validUntil, .credentialGet)
        }
    }

    var generation: AnswerGeneration { AnswerGeneration(tokens: tokens.generation, providers: providers.generation) }

    var currentTime: Date { tokens.currentTime }

    var pinsProcesses: Bool { providers.pinsProcesses }

    func answeredAgain() { tokens.countAnswer() }

    func answered(_ method: RPCMethod, _ count: Int, eachWithin duration: Duration) {
        metrics?.cachedAnswers(method, count, eachWithin: duration)
    }
}
