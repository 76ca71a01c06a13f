import AuthGateCore
import AuthGateRPC
import FoundationEssentials
import Synchronization

/// Sessions' current tokens, already encoded as `token` results, readable from any thread
/// without a hop to ``SessionManager``: the event loops answer a plain `token` call from here
/// (``CachedTokenAnswers``).
///
/// Only ``SessionManager`` writes, from inside the actor, so what is published is always a
/// subset of its current state:
/// - a session's entry is withdrawn the moment its record's tokens change or it goes (see
///   ``SessionTable``), so a refreshed, replaced or signed-out session is never answered from
///   an old entry;
/// - an entry is published only when the manager itself answers `token` with the session's
///   current tokens, which is after they reached the disk for a persistent session.
///
/// A session nobody asks a token for costs nothing here; one in use costs its encoded
/// answer (a few hundred bytes).
final class PublishedTokens: Sendable {
    struct Key: Hashable, Sendable {
        var uid: UInt32
        var provider: String
        var session: String
    }

    /// Not the whole ``TokenSet`` (~140 bytes, mostly what no answer needs): what the answer
    /// is judged by, and the tokens that tell a publication of the same answer again.
    private struct Entry: Sendable {
        /// The access and ID tokens the result holds: their text is shared with the session's
        /// record, not copied.
        var accessToken: Secret
        var idToken: Secret?
        var expiresAt: Date
        /// How long the provider made them live (from when they arrived to their expiry).
        var lifetime: TimeInterval
        /// The minimum validities above ``lifetime`` served here by ``MinimumValidity``'s rule:
        /// only those the manager has logged once, so that the first caller asking one is seen.
        var unmeetable: Set<Int>
        /// The `result` member of the answer: `TokenResult` encoded as the dispatcher would.
        var result: [UInt8]

        func holds(_ tokens: TokenSet) -> Bool {
            accessToken == tokens.accessToken && idToken == tokens.idToken && expiresAt == tokens.expiresAt
        }
    }

    private let entries = Mutex<[Key: Entry]>([:])
    private let answers = Atomic<Int>(0)
    private let changes = Atomic<UInt64>(0)
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// Publishes `tokens`, obtained at `obtainedAt`, as `key`'s current tokens (encoded once; a
    /// no-op when they already are).
    /// - Parameter unmeetable: The minimum validities to serve by ``MinimumValidity``'s rule.
    func publish(_ tokens: TokenSet, obtainedAt: Date, unmeetable: Set<Int> = [], for key: SessionKey) {
        let publishedKey = Key(key)
        // An entry is withdrawn whenever its session's tokens change (``SessionTable``), so one
        // still here with the same tokens and expiry holds this very answer.
        if entries.withLock({ $0[publishedKey].map { $0.holds(tokens) && $0.unmeetable == unmeetable } ?? false }) { return }
        guard let result = try? RPCCoding.makeEncoder().encode(TokenResult(tokens)) else { return }
        let entry = Entry(
            accessToken: tokens.accessToken,
            idToken: tokens.idToken,
            expiresAt: tokens.expiresAt,
            lifetime: tokens.expiresAt.timeIntervalSince(obtainedAt),
            unmeetable: unmeetable,
            result: Array(result)
        )
        entries.withLock { $0[publishedKey] = entry }
        changes.add(1, ordering: .releasing)
    }

    func withdraw(_ key: SessionKey) {
        if entries.withLock({ $0.removeValue(forKey: Key(key)) }) != nil {
            changes.add(1, ordering: .releasing)
        }
    }

    /// Counts every publication and withdrawal, each after it took effect: a result given when
    /// it read N is still current while it reads N (``RecentTokenAnswers``).
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// The time tokens are judged at (the daemon's clock, a test's in tests).
    var currentTime: Date { now() }

    /// The encoded `token` result for `key` when its token stays valid for more than
    /// `minimumValidity` seconds (or, for a minimum its lifetime cannot meet, as
    /// ``MinimumValidity`` says), and until when it does; `nil` when the manager must decide
    /// (refresh, sign-in, a minimum not yet logged…). Each result given counts as an answer
    /// (``answerCount``).
    func result(for key: Key, minimumValidity: Int) -> (result: [UInt8], validUntil: Date)? {
        let now = now()
        let found = entries.withLock { entries -> (result: [UInt8], validUntil: Date)? in
            guard let entry = entries[key] else { return nil }
            var required = TimeInterval(minimumValidity)
            if MinimumValidity.isUnmeetable(asked: required, lifetime: entry.lifetime) {
                guard entry.unmeetable.contains(minimumValidity) else { return nil }
                required = MinimumValidity.effective(asked: required, lifetime: entry.lifetime)
            }
            guard entry.expiresAt.timeIntervalSince(now) > required else { return nil }
            return (entry.result, entry.expiresAt.addingTimeInterval(-required))
        }
        if found != nil { countAnswer() }
        return found
    }

    /// Counts an answer given again from ``RecentTokenAnswers``.
    func countAnswer() {
        answers.add(1, ordering: .relaxed)
    }

    /// How many results were given since the daemon started (`daemon.info` for administrators).
    var answerCount: Int { answers.load(ordering: .relaxed) }

    var count: Int { entries.withLock { $0.count } }
}

extension PublishedTokens.Key {
    init(_ key: SessionKey) {
        self.init(uid: key.uid, provider: key.provider.rawValue, session: key.name.rawValue)
    }
}
