import AuthGateCore
import AuthGateRPC
import NIOCore

/// Answers a plain `token` call for a session's current token where its line was read: on the
/// connection's event loop, with no task, no actor and no JSON coder.
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
    /// Counts and times each answer (two atomic additions and a histogram update, measured
    /// in docs/BENCHMARKS.md); `nil` where nothing is measured.
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
    func answer<Answer>(to line: UnsafeRawBufferPointer, uid: UInt32, _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer) -> Answer? {
        let start = ContinuousClock.now
        guard let request = PlainTokenRequest(line), providers.contains(request.provider) else { return nil }
        let key = PublishedTokens.Key(uid: uid, provider: request.provider, session: request.session ?? SessionName.default.rawValue)
        guard let result = tokens.result(for: key, minimumValidity: request.minimumValidity ?? TokenParams.defaultMinimumValidity) else {
            return nil
        }
        let answer = write(request.id, result)
        metrics?.cachedTokenAnswer(duration: .now - start)
        return answer
    }
}
