import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import NIOCore

/// Answers a plain `token` or `credential.get` call for a session's current token where its
/// line was read — on the front door's thread (``FrontDoor``) or a handed-on connection's event
/// loop — with no task, no actor and no JSON coder.
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
struct CachedTokenAnswers: Sendable {
    let tokens: PublishedTokens
    let providers: OpenProviders
    /// Counts and times the answers (two atomic additions per answer, or per batch at the front
    /// door, and a histogram update per answer; measured in docs/BENCHMARKS.md); `nil` where
    /// nothing is measured.
    var metrics: DaemonMetrics?

    /// The whole answer line, or `nil` when the dispatcher must answer.
    func answer(to line: ByteBuffer, uid: UInt32, allocator: ByteBufferAllocator) -> ByteBuffer? {
        line.withUnsafeReadableBytes { bytes in
            answer(to: bytes, uid: uid) { id, result in
                var answer = allocator.buffer(capacity: result.count + id.count + RPCLine.successFramingLength)
                RPCLine.success(id: id, result: result, into: &answer)
                return answer
            }
        }
    }

    /// Whether `line` (without its newline) can be answered here; if so, `write` is given the
    /// request's id and the encoded result to frame (``RPCLine``) and its result is returned.
    /// Counted and timed in the metrics, one answer at a time (the front door counts its own
    /// answers per batch of events instead, ``FrontDoor``).
    func answer<Answer>(to line: UnsafeRawBufferPointer, uid: UInt32, _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer) -> Answer? {
        let start = ContinuousClock.now
        guard let found = lookUp(line, uid: uid, write) else { return nil }
        metrics?.cachedAnswers(found.method, 1, eachWithin: .now - start)
        return found.answer
    }

    /// ``answer(to:uid:_:)`` without the metrics, until when the token stays valid enough for
    /// this request, and the method answered (for the metrics).
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

    /// Changes when a token is published or withdrawn or a provider changes: an answer found
    /// under one generation is the answer while the generation is the same (and the token valid).
    struct Generation: Equatable {
        var tokens: UInt64
        var providers: UInt64
    }

    var generation: Generation { Generation(tokens: tokens.generation, providers: providers.generation) }
}
