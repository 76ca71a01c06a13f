import AuthGateCore
import Foundation
import Testing

@testable import AuthGateDaemon

@Suite("Session table")
struct SessionTableTests {
    /// Records keyed as a dictionary would keep them, through growth and removals that move
    /// boxes back into freed slots.
    @Test("every record stays findable through inserts, replacements and removals, as a dictionary's would")
    func matchesDictionary() {
        var table = SessionTable(observer: NoSessionObserver())
        var model: [SessionKey: UInt64] = [:]
        let binding = SessionBinding(client: MockIdentityProvider(settings: MockProviderSettings()), policy: RefreshPolicy(), storage: .memory)
        var generator = SystemRandomNumberGenerator()
        let providers = [ProviderID("a")!, ProviderID("b")!]
        for step in 0..<20_000 {
            let key = SessionKey(
                uid: UInt32.random(in: 1000...1003, using: &generator),
                provider: providers.randomElement(using: &generator)!,
                name: SessionName("s\(Int.random(in: 0..<1_500, using: &generator))")!
            )
            if Int.random(in: 0..<3, using: &generator) == 0 {
                #expect((table.removeValue(forKey: key) != nil) == (model.removeValue(forKey: key) != nil))
            } else {
                table[key] = SessionRecord(
                    grant: .password,
                    tokens: nil,
                    subject: nil,
                    state: .loginRequired,
                    generation: UInt64(step),
                    binding: binding,
                    obtainedAt: Date()
                )
                model[key] = UInt64(step)
            }
        }
        #expect(table.count == model.count)
        for (key, generation) in model { #expect(table[key]?.generation == generation) }
        let listed = Dictionary(uniqueKeysWithValues: table.all.map { ($0.key, $0.value.generation) })
        #expect(listed == model)
        for uid in UInt32(1000)...1003 { #expect(table.count(uid: uid) == model.keys.count { $0.uid == uid }) }
    }
}
