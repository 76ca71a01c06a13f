import AuthGateCore
import Foundation
import Testing

@testable import AuthGateDaemon

/// The jobs the session manager gives to values of their own, each on its own: the room a uid's
/// sessions may take, a provider's pause, when platform token files are looked at, and when a
/// backlog is said.
@Suite("Session manager's jobs")
struct SessionManagerJobsTests {
    private let start = Date(timeIntervalSince1970: 1_800_000_000)

    private func key(_ uid: UInt32, _ name: String, provider: String = "corp") -> SessionKey {
        SessionKey(uid: uid, provider: ProviderID(provider)!, name: SessionName(name)!)
    }

    @Test("a uid at its most sessions is refused a new one, counting sign-ins under way, but may replace one")
    func room() throws {
        var room = SessionRoom(maximumPerUser: 2)
        try room.reserve(for: key(1000, "a"), exists: false, held: 1)
        // One held and one under way: a third is refused, for this uid only.
        #expect(throws: AuthGateError.self) { try room.ensure(for: key(1000, "b"), exists: false, held: 1) }
        try room.ensure(for: key(1001, "b"), exists: false, held: 1)
        // The session under way may sign in again, and an existing one may be replaced.
        try room.ensure(for: key(1000, "a"), exists: false, held: 1)
        try room.ensure(for: key(1000, "c"), exists: true, held: 2)
        room.release(key(1000, "a"))
        try room.ensure(for: key(1000, "b"), exists: false, held: 1)
        do {
            try room.ensure(for: key(1000, "b"), exists: false, held: 2)
            Issue.record("a uid holding its most sessions got room for another")
        } catch {
            #expect(error.reason == .rateLimited)
            #expect(error.message == "You have 2 sessions, the most one user may hold; sign out of some (authgate logout) first.")
        }
    }

    @Test(
        "a provider's pause defers its refreshes over its window, but not past shortly before the token expires unless the pause does; a shorter one does not shorten it, and it ends once passed"
    )
    func pauses() {
        var pauses = ProviderPauses()
        let corp = ProviderID("corp")!
        let later = start.addingTimeInterval(86_400)
        let unpaused = pauses.deferral(of: corp, at: start, before: later) {
            Issue.record("a provider without a pause asked for a number")
            return 0
        }
        #expect(unpaused == nil)
        pauses.pause(corp, retryAfterSeconds: 120, at: start)
        pauses.pause(corp, retryAfterSeconds: 30, at: start)
        let spread = pauses.deferral(of: corp, at: start.addingTimeInterval(60), before: later) { 0.5 }
        #expect(spread == start.addingTimeInterval(120 + 60))
        // A token that expires sooner is refreshed before it does, though not before the pause ends.
        let soon = pauses.deferral(of: corp, at: start.addingTimeInterval(60), before: start.addingTimeInterval(150)) { 0.5 }
        #expect(soon == start.addingTimeInterval(150))
        let sooner = pauses.deferral(of: corp, at: start.addingTimeInterval(60), before: start.addingTimeInterval(90)) { 0.5 }
        #expect(sooner == start.addingTimeInterval(120))
        let other = pauses.deferral(of: ProviderID("other")!, at: start, before: later) { 0 }
        #expect(other == nil)
        // A day's Retry-After pauses for an hour at most.
        pauses.pause(corp, retryAfterSeconds: 86_400, at: start)
        let capped = pauses.deferral(of: corp, at: start, before: later) { 0 }
        #expect(capped == start.addingTimeInterval(3600))
        let passed = pauses.deferral(of: corp, at: start.addingTimeInterval(3600), before: later) { 0 }
        let after = pauses.deferral(of: corp, at: start, before: later) { 0 }
        #expect(passed == nil && after == nil)
    }

    @Test("platform token files are looked at every 5 seconds while a session has one, and the scheduler wakes for them")
    func platformTokenChecks() {
        var checks = PlatformTokenChecks()
        let none = checks.due(at: start)
        #expect(none.isEmpty)
        #expect(checks.sleep(untilPlan: nil) == nil && checks.sleep(untilPlan: 30) == 30)
        checks.watch(key(1000, "default"))
        #expect(checks.sleep(untilPlan: nil) == 5 && checks.sleep(untilPlan: 30) == 5 && checks.sleep(untilPlan: 2) == 2)
        let first = checks.due(at: start)
        let tooSoon = checks.due(at: start.addingTimeInterval(4.9))
        let next = checks.due(at: start.addingTimeInterval(5))
        #expect(first == [key(1000, "default")] && tooSoon.isEmpty && next == [key(1000, "default")])
        checks.forget(key(1000, "default"))
        let forgotten = checks.due(at: start.addingTimeInterval(20))
        #expect(forgotten.isEmpty)
    }

    @Test("backlogs are looked for once a second at most, and each provider's is said once a minute")
    func backlogWarnings() {
        var warnings = BacklogWarnings()
        let corp = ProviderID("corp")!
        let looks = [0, 0.5, 1].map { warnings.looks(at: start.addingTimeInterval($0)) }
        #expect(looks == [true, false, true])
        let says = [
            warnings.warns(about: corp, at: start),
            warnings.warns(about: ProviderID("other")!, at: start),
            warnings.warns(about: corp, at: start.addingTimeInterval(59)),
            warnings.warns(about: corp, at: start.addingTimeInterval(60)),
        ]
        #expect(says == [true, true, false, true])
    }
}
