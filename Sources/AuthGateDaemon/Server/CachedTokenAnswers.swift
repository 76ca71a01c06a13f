import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import NIOCore

/// Answers a plain `token` call for a session's current token where its line was read — on the
/// front door's thread (``FrontDoor``) or a handed-on connection's event loop — with no task, no
/// actor and no JSON coder.
///
/// It answers only what needs no decision: a ``PlainTokenRequest`` for a provider in
/// ``OpenProviders`` (usable, no access rules) whose session has a token in
/// ``PublishedTokens`` that stays valid long enough. Everything else — a refresh, an error,
/// access rules, other methods — goes the ordinary way through ``RPCDispatcher``, with the
/// same result either way: published tokens are what the session manager would return.
///
/// What it buys, measured with `scripts/bench` (docs/BENCHMARKS.md): the cached `token` call
/// is the one every API call of every client makes, and through the dispatcher it cost
/// ~117 µs of CPU (JSON decoding and encoding, the async channel bridge, two actor hops).
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
                var answer = allocator.buffer(capacity: result.count + id.count + SuccessLine.framingLength)
                SuccessLine.write(id: id, result: result, into: &answer)
                return answer
            }
        }
    }

    /// Whether `line` (without its newline) can be answered here; if so, `write` is given the
    /// request's id and the encoded result to frame (``SuccessLine``) and its result is returned.
    /// Counted and timed in the metrics, one answer at a time (the front door counts its own
    /// answers per batch of events instead, ``FrontDoor``).
    func answer<Answer>(to line: UnsafeRawBufferPointer, uid: UInt32, _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer) -> Answer? {
        let start = ContinuousClock.now
        guard let found = lookUp(line, uid: uid, write) else { return nil }
        metrics?.cachedTokenAnswers(1, eachWithin: .now - start)
        return found.answer
    }

    /// ``answer(to:uid:_:)`` without the metrics, and until when the token stays valid enough
    /// for this request.
    func lookUp<Answer>(_ line: UnsafeRawBufferPointer, uid: UInt32,
                        _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer) -> (answer: Answer, validUntil: Date)? {
        guard let request = PlainTokenRequest(line), providers.contains(request.provider) else { return nil }
        let key = PublishedTokens.Key(uid: uid, provider: request.provider, session: request.session ?? SessionName.default.rawValue)
        guard let found = tokens.result(for: key, minimumValidity: request.minimumValidity ?? TokenParams.defaultMinimumValidity) else {
            return nil
        }
        return (write(request.id, found.result), found.validUntil)
    }

    /// Changes when a token is published or withdrawn or a provider changes: an answer found
    /// under one generation is the answer while the generation is the same (and the token valid).
    struct Generation: Equatable {
        var tokens: UInt64
        var providers: UInt64
    }

    var generation: Generation { Generation(tokens: tokens.generation, providers: providers.generation) }
}

/// What the front door (one thread) remembers of its last answers: the same line from the same
/// uid gets the same bytes again — no scan, no hashing, no lock — while the
/// ``CachedTokenAnswers/Generation`` is unchanged (nothing published or withdrawn, no provider
/// changed) and the token stays valid long enough for the request. Clients mostly send the very
/// same line again (`authgate token corp`, a helper, a keep-alive client with a fixed id).
///
/// What it buys, measured with the C load generator of `scripts/bench` (docs/BENCHMARKS.md):
/// keep-alive, 64 clients, 263k → 317–327k req/s (0.71 → 0.93 of the C floor in the same runs);
/// the scan, the two strings, the hashing and the lock were a quarter of the thread's time.
struct RecentTokenAnswers {
    private struct Entry {
        var uid: UInt32
        var line: [UInt8]
        /// The whole answer line, newline included.
        var answer: [UInt8]
        var generation: CachedTokenAnswers.Generation
        var validUntil: Date
    }

    /// A handful: one per line in use at once (users × providers × sessions asked for).
    static let capacity = 16
    private var entries: [Entry] = []
    private var nextReplaced = 0

    /// Calls `body` with the answer line (newline included) to `line` from `uid`, and returns
    /// its result; `nil` when the line is not answered from the cache at all. The metrics are
    /// the caller's (the front door counts its answers per batch of events).
    mutating func withAnswer<Result>(to line: UnsafeRawBufferPointer, uid: UInt32, from answers: CachedTokenAnswers,
                                     _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        let generation = answers.generation
        for index in entries.indices where entries[index].uid == uid && entries[index].line.elementsEqual(line) {
            guard entries[index].generation == generation, answers.tokens.currentTime < entries[index].validUntil else {
                entries.remove(at: index)
                break
            }
            answers.tokens.countAnswer()
            return entries[index].answer.withUnsafeBytes(body)
        }
        guard let found = answers.lookUp(line, uid: uid, { id, result in
            var answer: [UInt8] = []
            answer.reserveCapacity(id.count + result.count + SuccessLine.framingLength)
            SuccessLine.write(id: id, result: result, into: &answer)
            return answer
        }) else { return nil }
        let entry = Entry(uid: uid, line: Array(line), answer: found.answer, generation: generation, validUntil: found.validUntil)
        if entries.count < Self.capacity {
            entries.append(entry)
        } else {
            entries[nextReplaced] = entry
            nextReplaced = (nextReplaced + 1) % Self.capacity
        }
        return found.answer.withUnsafeBytes(body)
    }
}
