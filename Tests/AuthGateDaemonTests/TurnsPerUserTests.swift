import AuthGateTestSupport
import Foundation
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
