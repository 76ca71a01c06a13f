import AuthGateServer
import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

@testable import AuthGateDaemon

@Suite("One turn at a time per user")
struct TurnsPerUserTests {
    @Test("a user's requests take turns in the order they came, another user's go at once, and a full line is refused at once")
    func turnsInOrder() async throws {
        let turns = TurnsPerUser(maximumWaiting: 2)
        #expect(await turns.take(1000))
        let order = SharedText()
        let first = Task {
            guard await turns.take(1000) else { return }
            order.append(Data("first ".utf8))
            turns.give(1000)
        }
        try await until { turns.waitingCount(1000) == 1 }
        let second = Task {
            guard await turns.take(1000) else { return }
            order.append(Data("second".utf8))
            turns.give(1000)
        }
        try await until { turns.waitingCount(1000) == 2 }
        #expect(await turns.take(1000) == false, "the line is full")
        #expect(await turns.take(1001), "another user does not wait")
        turns.give(1001)
        #expect(order.text.isEmpty, "nobody went before the turn was given")
        turns.give(1000)
        _ = await (first.value, second.value)
        #expect(order.text == "first second")
        #expect(await turns.take(1000), "the turn is free again")
    }
}

@Suite("Revocations at providers")
struct RevocationTurnsTests {
    @Test("one uid's revocations run one at a time, waiting in line, while another uid's run meanwhile")
    func oneAtATimePerUser() async throws {
        let share = ProviderRequestShare()
        let flooding = PeerCredentials(pid: 1, uid: 60001, gid: 60001)
        let other = PeerCredentials(pid: 2, uid: 60002, gid: 60002)
        let running = Shared((now: 0, most: 0))
        let released = Shared(false)
        let flood = Task {
            await withTaskGroup(of: Bool?.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        await share.revoking(for: flooding) {
                            running.withLock {
                                $0.now += 1
                                $0.most = max($0.most, $0.now)
                            }
                            while !released.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
                            running.withLock { $0.now -= 1 }
                            return true
                        }
                    }
                }
                return await group.reduce(into: 0) { $0 += $1 == true ? 1 : 0 }
            }
        }
        try await until { running.withLock { $0.now } == 1 }
        #expect(await share.revoking(for: other) { "revoked" } == "revoked", "another uid's revocation does not wait")
        released.withLock { $0 = true }
        #expect(await flood.value == 6, "every revocation was made, in turn")
        #expect(running.withLock { $0.most } == 1)
    }
}

/// A value tasks share, behind a lock.
private final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result { value.withLock { body(&$0) } }
}
