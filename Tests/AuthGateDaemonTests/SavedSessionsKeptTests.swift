import AuthGateCore
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateDaemon

/// Saved sessions are never written over unread: those of a provider whose file cannot be
/// used at start stay on disk, and a store that opens late reads every file first.
@Suite("Saved sessions kept when they cannot be used")
struct SavedSessionsKeptTests {
    private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    private let clock = ManualClock()
    private let scratch: ScratchDirectory
    private let corp = ProviderID("corp")!
    private let other = ProviderID("other")!

    init() throws { scratch = try ScratchDirectory() }

    private func persistence(reads: FailingReads? = nil) -> SessionPersistence {
        let keeper = StorageKeyKeeper(
            stateDirectory: scratch.path + "/state",
            credentialsDirectory: nil,
            choice: .file,
            mode: .user,
            environment: ["PATH": "/usr/bin:/bin"]
        )
        guard let reads else { return SessionPersistence(keeper: keeper, logger: quiet) }
        return SessionPersistence(keeper: keeper, logger: quiet, openForReading: reads.open)
    }

    private func manager(_ persistence: SessionPersistence) -> SessionManager {
        SessionManager(logger: quiet, persistence: persistence, now: { [clock] in clock.now })
    }

    private func binding(_ provider: ScriptedProvider) -> SessionBinding {
        SessionBinding(client: provider, policy: RefreshPolicy(), storage: .persistent)
    }

    /// Signs uid 1000 in to `provider` as session `name`.
    private func signIn(_ sessions: SessionManager, _ provider: ProviderID, _ name: String = "default") async throws {
        let client = ScriptedProvider(clock: clock)
        let result = try await client.signIn(PasswordCredentials(username: "u", password: Secret("p")))
        _ = await sessions.store(result, grant: .password, binding: binding(client), for: SessionKey(uid: 1000, provider: provider, name: SessionName(name)!))
    }

    /// The providers and names of uid 1000's sessions in its file, as a restart reads them.
    private func onDisk(_ persistence: SessionPersistence) throws -> [String] {
        let store = try #require(persistence.store())
        return (store.loadAll().sessions[1000] ?? []).map { "\($0.provider)/\($0.session)" }.sorted()
    }

    @Test(
        "a saved session whose provider's file cannot be used at start stays on disk through its uid's other saves, comes back when a reload makes the provider usable, and goes when the provider is removed"
    )
    func unusableProvidersSessionsKept() async throws {
        let store = persistence()
        try await signIn(manager(store), corp)
        try await signIn(manager(store), other)
        #expect(try onDisk(store) == ["corp/default", "other/default"])

        // A restart with corp's file invalid (a typo, its secret missing): other's session is
        // restored; corp's is held, and a new sign-in's save keeps it.
        let restarted = manager(store)
        let saved = try #require(store.store()).loadAll().sessions
        let bindings = [other: binding(ScriptedProvider(clock: clock))]
        #expect(await restarted.restore(saved, bindings: bindings, unusable: [corp]) == 1)
        try await signIn(restarted, other, "second")
        #expect(try onDisk(store) == ["corp/default", "other/default", "other/second"], "corp's session is still on disk")
        #expect(await restarted.status(uid: 1000, provider: corp).isEmpty, "held, not used")

        // The file fixed and reloaded: the session comes back.
        #expect(await restarted.takeBackHeld(provider: corp, binding: binding(ScriptedProvider(clock: clock))) == 1)
        #expect(await restarted.status(uid: 1000, provider: corp).count == 1)

        // Another restart with corp unusable, then corp removed: its session goes from the disk.
        let again = manager(store)
        #expect(await again.restore(try #require(store.store()).loadAll().sessions, bindings: bindings, unusable: [corp]) == 2)
        #expect(await again.takeBackHeld(provider: corp, binding: nil) == 0)
        #expect(try onDisk(store) == ["other/default", "other/second"])
    }

    @Test("a session store that opens only after start (nothing restored then) reads every file before it writes one: the sessions saved before stay on disk")
    func lateStoreReadsBeforeWriting() async throws {
        let store = persistence()
        try await signIn(manager(store), corp)
        // The next run restored nothing (its store could not open at start, or no provider kept
        // sessions on disk then) and saves a new sign-in.
        let late = manager(persistence())
        try await signIn(late, other)
        #expect(try onDisk(store) == ["corp/default", "other/default"])
    }

    @Test("a held session gives way for good to one of the same name signed in since: a logout of that one leaves neither on disk")
    func heldSessionGivesWay() async throws {
        let store = persistence()
        try await signIn(manager(store), corp)
        // A run whose store opened late: its own sign-in of the same name replaces the old one.
        let late = manager(persistence())
        try await signIn(late, corp)
        #expect(try onDisk(store) == ["corp/default"])
        _ = await late.remove(SessionKey(uid: 1000, provider: corp, name: .default))
        #expect(try onDisk(store).isEmpty, "the old session did not come back with the logout")
    }

    @Test(
        "a sessions file that cannot be read at start (a disk error) is never written over: its uid's sign-ins stay in memory, said so, until it reads; then its sessions stay on disk beside them"
    )
    func unreadFileNeverWrittenOver() async throws {
        try await signIn(manager(persistence()), corp)
        let file = scratch.path + "/state/sessions/1000.sessions"
        let reads = FailingReads(failing: [file], errno: EIO)
        let store = persistence(reads: reads)
        let restarted = manager(store)
        let loaded = try #require(store.store()).loadAll()
        #expect(loaded.sessions.isEmpty && loaded.problems.map(\.uid) == [1000])
        #expect(await restarted.restore(loaded.sessions, bindings: [:], unusable: []) == 0)

        try await signIn(restarted, other)
        let notSaved = try #require(await restarted.status(uid: 1000, provider: other).first?.notSaved)
        #expect(notSaved.contains(file) && notSaved.contains("not written over"), "\(notSaved)")
        reads.failing.withLock { $0 = [] }
        // (A store of its own reads the file: the daemon's store does not read it here.)
        #expect(try onDisk(persistence()) == ["corp/default"], "the file is as it was")

        // It reads now: the next save keeps what it holds.
        try await signIn(restarted, other, "second")
        #expect(try onDisk(persistence()) == ["corp/default", "other/default", "other/second"])
        #expect(await restarted.status(uid: 1000, provider: other).allSatisfy { $0.notSaved == nil })
    }
}
