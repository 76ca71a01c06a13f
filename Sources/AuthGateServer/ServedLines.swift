package import AuthGateRPC
package import FoundationEssentials
package import NIOCore

/// What the socket server asks of the daemon. The server moves lines: it accepts, frames,
/// limits, times out and writes; what a line means — sessions, providers, storage — is the
/// daemon's, behind these two protocols.
///
/// ``TokenAnswers`` answers a plain `token` or `credential.get` call for a current token where
/// its line was read — on the front door's thread (``FrontDoor``) or a handed-on connection's
/// event loop (``RPCConnectionHandler``) — with no task, no actor and no JSON coder (the
/// daemon's `CachedTokenAnswers`). It answers only what needs no decision; every other line
/// goes to the ``RequestResponder`` (the daemon's dispatcher), with the same result either way.
package protocol TokenAnswers: Sendable {
    /// Changes when an answer may have: a token published or withdrawn, a provider changed. An
    /// answer found under one generation is the answer while the generation is the same and
    /// the token stays valid (``RecentTokenAnswers`` relies on it).
    var generation: AnswerGeneration { get }
    /// Now, on the clock the tokens' validity is judged by.
    var currentTime: Date { get }
    /// Whether a connection must pin its caller's process as it is accepted (``PeerCredentials``):
    /// some provider's access depends on the calling executable.
    var pinsProcesses: Bool { get }

    /// Whether `line` (without its newline) can be answered here; if so, `write` is given the
    /// request's id and the encoded result to frame (``RPCLine``), and its result is returned
    /// with until when the token stays valid enough for this request and the method answered.
    /// Counts nothing (see ``answered(_:_:eachWithin:)``).
    func lookUp<Answer>(
        _ line: UnsafeRawBufferPointer,
        uid: UInt32,
        _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer
    ) -> (answer: Answer, validUntil: Date, method: RPCMethod)?

    /// An answer remembered by ``RecentTokenAnswers`` was given again.
    func answeredAgain()
    /// `count` calls to `method` were answered here, each within `duration` (the metrics).
    func answered(_ method: RPCMethod, _ count: Int, eachWithin duration: Duration)
}

/// See ``TokenAnswers/generation``.
package struct AnswerGeneration: Equatable, Sendable {
    package var tokens: UInt64
    package var providers: UInt64

    package init(tokens: UInt64, providers: UInt64) {
        self.tokens = tokens
        self.providers = providers
    }
}

extension TokenAnswers {
    /// The whole answer line, or `nil` when the ``RequestResponder`` must answer. Counted and
    /// timed one answer at a time (the front door counts its answers per batch of events).
    package func answer(to line: ByteBuffer, uid: UInt32, allocator: ByteBufferAllocator) -> ByteBuffer? {
        line.withUnsafeReadableBytes { bytes in
            answer(to: bytes, uid: uid) { id, result in
                var answer = allocator.buffer(capacity: result.count + id.count + RPCLine.successFramingLength)
                RPCLine.success(id: id, result: result, into: &answer)
                return answer
            }
        }
    }

    /// ``lookUp(_:uid:_:)``, counted and timed in the metrics.
    package func answer<Answer>(to line: UnsafeRawBufferPointer, uid: UInt32, _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer) -> Answer? {
        let start = ContinuousClock.now
        guard let found = lookUp(line, uid: uid, write) else { return nil }
        answered(found.method, 1, eachWithin: .now - start)
        return found.answer
    }
}

/// Answers every request line ``TokenAnswers`` does not: the daemon's method dispatcher.
package protocol RequestResponder: Sendable {
    /// The answer line (with its newline) to `line`, from `caller`; `nil` for a notification,
    /// which gets no answer. A `token.watch` writes its notifications through `watchSink`.
    func respond(to line: Data, from caller: PeerCredentials, watchSink: WatchSink?) async -> Data?
}
