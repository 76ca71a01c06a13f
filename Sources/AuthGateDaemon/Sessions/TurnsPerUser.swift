import Synchronization

/// One turn at a time per uid, for work that runs on a small shared pool of threads: a user's
/// requests wait in line behind each other, never beside each other, so one user cannot hold
/// every thread of the pool while another user's work waits (the consent check's
/// identification, which may hash a large file each time the user touches it; revocations at
/// providers, a thousand of which one logout loop may start).
///
/// A user's line is bounded (``maximumWaiting``): beyond it a request is refused at once.
final class TurnsPerUser: Sendable {
    private struct State {
        /// The uids whose turn is taken.
        var taken: Set<UInt32> = []
        /// Who waits, per uid, in the order they came.
        var waiting: [UInt32: [CheckedContinuation<Bool, Never>]] = [:]
    }

    private let state = Mutex(State())
    /// Requests of one uid that may wait for its turn.
    let maximumWaiting: Int

    init(maximumWaiting: Int) {
        self.maximumWaiting = maximumWaiting
    }

    /// Waits for `uid`'s turn; `false` (at once) when its line is full. A `true` must be
    /// followed by ``give(_:)``.
    func take(_ uid: UInt32) async -> Bool {
        await withCheckedContinuation { continuation in
            enum Outcome { case now, full, queued }
            let outcome = state.withLock { current -> Outcome in
                guard current.taken.insert(uid).inserted else {
                    guard current.waiting[uid, default: []].count < maximumWaiting else { return .full }
                    current.waiting[uid, default: []].append(continuation)
                    return .queued
                }
                return .now
            }
            switch outcome {
            case .now: continuation.resume(returning: true)
            case .full: continuation.resume(returning: false)
            case .queued: break
            }
        }
    }

    /// Ends `uid`'s turn: the next of its line (if any) has it.
    func give(_ uid: UInt32) {
        let next = state.withLock { current -> CheckedContinuation<Bool, Never>? in
            guard var line = current.waiting[uid], !line.isEmpty else {
                current.taken.remove(uid)
                current.waiting[uid] = nil
                return nil
            }
            let next = line.removeFirst()
            current.waiting[uid] = line.isEmpty ? nil : line
            return next
        }
        next?.resume(returning: true)
    }

    /// How many requests of `uid` wait for its turn (for tests).
    func waitingCount(_ uid: UInt32) -> Int {
        state.withLock { $0.waiting[uid]?.count ?? 0 }
    }
}
