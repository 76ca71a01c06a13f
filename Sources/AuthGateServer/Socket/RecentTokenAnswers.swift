import AuthGateRPC
import FoundationEssentials

/// What the front door (one thread) remembers of its last answers: the same line from the same
/// uid gets the same bytes again — no scan, no hashing, no lock — while the
/// ``TokenAnswers/generation`` is unchanged (nothing published or withdrawn, no provider
/// changed) and the token stays valid long enough for the request. Clients mostly send the very
/// same line again (`authgate token corp`, a helper, a keep-alive client with a fixed id).
///
/// What it buys (docs/BENCHMARKS.md, "What was optimised"): the scan, the two strings, the
/// hashing and the lock were a quarter of the front door's time on keep-alive calls.
struct RecentTokenAnswers {
    private struct Entry {
        var uid: UInt32
        var line: [UInt8]
        /// The whole answer line, newline included.
        var answer: [UInt8]
        var generation: AnswerGeneration
        var validUntil: Date
        var method: RPCMethod
    }

    /// A handful: one per line in use at once (users × providers × sessions asked for).
    static let capacity = 16
    private var entries: [Entry] = []
    private var nextReplaced = 0

    /// Calls `body` with the answer line (newline included) to `line` from `uid`, and returns
    /// its result and the method answered; `nil` when the line is not answered from the cache
    /// at all. The metrics are the caller's (the front door counts its answers per batch of
    /// events).
    mutating func withAnswer<Result>(
        to line: UnsafeRawBufferPointer,
        uid: UInt32,
        from answers: any TokenAnswers,
        _ body: (UnsafeRawBufferPointer) -> Result
    ) -> (result: Result, method: RPCMethod)? {
        let generation = answers.generation
        for index in entries.indices where entries[index].uid == uid && entries[index].line.elementsEqual(line) {
            guard entries[index].generation == generation, answers.currentTime < entries[index].validUntil else {
                entries.remove(at: index)
                break
            }
            answers.answeredAgain()
            return (entries[index].answer.withUnsafeBytes(body), entries[index].method)
        }
        guard
            let found = answers.lookUp(
                line,
                uid: uid,
                { id, result in
                    var answer: [UInt8] = []
                    answer.reserveCapacity(id.count + result.count + RPCLine.successFramingLength)
                    RPCLine.success(id: id, result: result, into: &answer)
                    return answer
                }
            )
        else { return nil }
        let entry = Entry(
            uid: uid,
            line: Array(line),
            answer: found.answer,
            generation: generation,
            validUntil: found.validUntil,
            method: found.method
        )
        if entries.count < Self.capacity {
            entries.append(entry)
        } else {
            entries[nextReplaced] = entry
            nextReplaced = (nextReplaced + 1) % Self.capacity
        }
        return (found.answer.withUnsafeBytes(body), found.method)
    }
}
