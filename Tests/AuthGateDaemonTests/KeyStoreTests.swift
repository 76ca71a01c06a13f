import AuthGateCore
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Where the storage key is found, and how a key change survives a crash: in process, on real
/// files, with no keyring (the keyring itself: `KeyringTests`).
@Suite("Storage key: stores and rekey")
struct KeyStoreTests {
    let scratch: ScratchDirectory
    var state: String { scratch.path + "/state" }
    /// No session bus: the keyring is never reached from these tests.
    let noBus = ["PATH": "/usr/bin:/bin"]

    init() throws {
        scratch = try ScratchDirectory()
    }

    private func session(_ token: String) -> PersistedSession {
        PersistedSession(
            provider: "mock",
            session: "default",
            grant: .password,
            subject: "mock:demo",
            issuer: nil,
            clientID: nil,
            tokens: TokenSet(
                accessToken: Secret("access-\(token)"),
                tokenType: "Bearer",
                expiresAt: Date(timeIntervalSince1970: 1_800_000_000),
                refreshToken: Secret("refresh-\(token)"),
                scopes: ["profile"]
            ),
            savedAt: Date(timeIntervalSince1970: 1_799_999_000)
        )
    }

    private func keyFile(_ name: String = StorageKey.fileName) throws -> StorageKey? {
        let path = state + "/" + name
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return StorageKey(rawBytes: Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    private func opens(uid: UInt32, with key: StorageKey) throws -> Bool {
        let file = state + "/sessions/\(uid).sessions"
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        if case .success = SealedSessionsFile.open(bytes, uid: uid, key: key, file: file) { return true }
        return false
    }

    private func persistence(_ keeper: StorageKeyKeeper, log: SharedText? = nil, reads: FailingReads? = nil) -> SessionPersistence {
        var logger = Logger(label: "test") { _ in RecordingLogHandler(log ?? SharedText()) }
        logger.logLevel = .trace
        guard let reads else { return SessionPersistence(keeper: keeper, logger: logger) }
        return SessionPersistence(keeper: keeper, logger: logger, openForReading: reads.open)
    }

    @Test("a secret-tool that hangs is stopped after the timeout; `auto` falls back to the file and says why")
    func hangingKeyring() throws {
        let tool = scratch.path + "/hanging-secret-tool"
        // Written by a shell of its own: a file this process held open for writing could be
        // inherited by a child another test forks at that moment, and the exec below would then
        // fail with ETXTBSY ("Text file busy") instead of hanging.
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/sh")
        writer.arguments = ["-c", #"printf '#!/bin/sh\nexec sleep 30\n' > "$0" && chmod 755 "$0""#, tool]
        try writer.run()
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        let keeper = StorageKeyKeeper(
            stateDirectory: state,
            credentialsDirectory: nil,
            choice: .auto,
            mode: .user,
            environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "AUTHGATE_SECRET_TOOL": tool],
            keyringTimeout: .milliseconds(300)
        )
        let start = ContinuousClock.now
        let opened = try keeper.open()
        #expect(ContinuousClock.now - start < .seconds(3))
        #expect(opened.location == .file(path: state + "/authgate.key"))
        #expect(
            opened.notices.contains { $0.contains("did not answer within") && $0.contains("kept in \(state)/authgate.key instead") },
            "\(opened.notices)"
        )
        #expect(try keyFile() == opened.sealing)

        var strict = keeper
        strict.choice = .secretService
        #expect(throws: StorageError.self) { try strict.open() }
    }

    @Test("without a session bus, `auto` keeps the key in the state directory, and a system daemon never asks a keyring")
    func withoutBus() throws {
        let user = try StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .auto, mode: .user, environment: noBus).open()
        #expect(user.location == .file(path: state + "/authgate.key"))
        #expect(user.notices.contains { $0.contains("there is no session bus") })
        let system = try StorageKeyKeeper(
            stateDirectory: state,
            credentialsDirectory: nil,
            choice: .auto,
            mode: .system,
            environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"]
        ).open()
        #expect(system.sealing == user.sealing)
        #expect(system.notices == ["the storage key is kept in \(state)/authgate.key"])
    }

    @Test(
        "saved sessions whose key cannot be reached (a keyring out of reach; a credential not given, a key file gone) are not given a new key that would lose them",
        arguments: [true, false]
    )
    func noNewKeyOverSavedSessions(keyring: Bool) throws {
        try SessionStore(stateDirectory: state, key: .generate()).save([session("a")], uid: 1000)
        let keeper =
            keyring
            ? StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .auto, mode: .user, environment: noBus)
            : StorageKeyKeeper(stateDirectory: state, credentialsDirectory: scratch.path + "/no-credentials", choice: .file, mode: .system, environment: noBus)
        #expect {
            try keeper.open()
        } throws: { error in
            "\(error)".contains("not creating a new key")
        }
        #expect(try keyFile() == nil)
        #expect(persistence(keeper).store() == nil, "persistent sessions stay in memory; the file stays as it is")
        #expect(FileManager.default.fileExists(atPath: state + "/sessions/1000.sessions"))
    }

    @Test("a state directory another user may write to, or another user's, is refused with why, before any key is read or made")
    func stateDirectoryOthersMayChange() throws {
        let keeper = StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .file, mode: .system, environment: noBus)
        #expect(mkdir(state, 0o700) == 0 && chmod(state, 0o777) == 0)
        #expect {
            try keeper.open()
        } throws: { error in
            "\(error)".contains("other users may add and remove files in it (mode 777)")
        }
        #expect(try keyFile() == nil)
        if geteuid() == 0 {
            #expect(chmod(state, 0o700) == 0 && chown(state, 65534, 65534) == 0)
            #expect {
                try keeper.open()
            } throws: { error in
                "\(error)".contains("belongs to uid 65534")
            }
        }
        #expect(chown(state, geteuid(), getegid()) == 0 && chmod(state, 0o700) == 0)
        _ = try keeper.open()
        #expect(try keyFile() != nil)
    }

    /// A rekey cut short by `unreadable` left every file to its key (`old`, or the pending
    /// `next`); then, once every file reads, a rekey finishes the pending change and makes its
    /// own key, which opens every file.
    private func expectCutShortThenFinished(
        _ persistence: SessionPersistence,
        _ reads: FailingReads,
        unreadable: UInt32,
        old: StorageKey,
        next: StorageKey
    ) throws {
        reads.failing.withLock { $0 = [state + "/sessions/\(unreadable).sessions"] }
        #expect(throws: StorageError.self) { try persistence.rekey() }
        #expect(try keyFile() == old && keyFile(StorageKey.nextFileName) == next)
        for uid: UInt32 in [1000, 1001, 1002] { #expect(try opens(uid: uid, with: old) || opens(uid: uid, with: next)) }

        reads.failing.withLock { $0 = [] }
        _ = try persistence.rekey()
        let current = try #require(try keyFile())
        #expect(current != old && current != next)
        #expect(try keyFile(StorageKey.nextFileName) == nil)
        for uid: UInt32 in [1000, 1001, 1002] { #expect(try opens(uid: uid, with: current)) }
    }

    @Test("rekey (file): every file sealed with a new key, which replaces the old; the old key opens nothing")
    func rekeyFile() throws {
        let keeper = StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .file)
        let persistence = persistence(keeper)
        let store = try #require(persistence.store())
        try store.save([session("a")], uid: 1000)
        try store.save(
            [session("b"), session("c")].enumerated().map {
                var s = $1
                s.session = "s\($0)"
                return s
            },
            uid: 1001
        )
        let old = try #require(try keyFile())

        let outcome = try persistence.rekey()
        #expect(outcome.location == .file(path: state + "/authgate.key"))
        #expect(outcome.report.files == 2 && outcome.report.sessions == 3 && outcome.report.unreadable.isEmpty)
        let new = try #require(try keyFile())
        #expect(new != old)
        #expect(try keyFile(StorageKey.nextFileName) == nil)
        for uid: UInt32 in [1000, 1001] {
            #expect(try opens(uid: uid, with: new))
            #expect(try !opens(uid: uid, with: old))
        }
        // Saves after the rekey use the new key, and a new daemon reads everything.
        try store.save([session("d")], uid: 1002)
        #expect(try opens(uid: 1002, with: new))
        let reopened = try #require(self.persistence(keeper).store()).loadAll()
        #expect(reopened.problems.isEmpty)
        #expect(reopened.sessions[1001]?.count == 2 && reopened.sessions[1000] == [session("a")])
    }

    @Test("a rekey interrupted after some files were sealed again is finished at the next start", arguments: [0, 1, 2])
    func interruptedRekey(resealed: Int) throws {
        let old = StorageKey.generate()
        let new = StorageKey.generate()
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try StorageKey.write(old, to: state + "/authgate.key", in: state)
        for uid: UInt32 in [1000, 1001] {
            try SessionStore(stateDirectory: state, key: old).save([session("\(uid)")], uid: uid)
        }
        // The crash: the next key stored, `resealed` files sealed with it, the switch not made.
        try StorageKey.write(new, to: state + "/" + StorageKey.nextFileName, in: state)
        for uid: UInt32 in [1000, 1001].prefix(resealed) {
            try SessionStore(stateDirectory: state, key: new).save([session("\(uid)")], uid: uid)
        }

        let log = SharedText()
        let store = try #require(persistence(StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .file), log: log).store())
        #expect(log.text.contains("interrupted rekey is finished"))
        #expect(try keyFile() == new)
        #expect(try keyFile(StorageKey.nextFileName) == nil)
        let loaded = store.loadAll()
        #expect(loaded.problems.isEmpty)
        #expect(loaded.sessions == [1000: [session("1000")], 1001: [session("1001")]])
        for uid: UInt32 in [1000, 1001] {
            #expect(try opens(uid: uid, with: new) && !opens(uid: uid, with: old))
        }
    }

    @Test("a rekey first finishes the key change start-up could not, so a rekey cut short loses no file sealed with that change's key")
    func rekeyAfterUnfinishedChange() throws {
        let old = StorageKey.generate()
        let next = StorageKey.generate()
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try StorageKey.write(old, to: state + "/authgate.key", in: state)
        for uid: UInt32 in [1000, 1001, 1002] {
            try SessionStore(stateDirectory: state, key: old).save([session("\(uid)")], uid: uid)
        }
        // An interrupted rekey: its next key stored, no file sealed with it yet.
        try StorageKey.write(next, to: state + "/" + StorageKey.nextFileName, in: state)
        let file = { (uid: UInt32) in self.state + "/sessions/\(uid).sessions" }

        // Start-up finishes it as far as 1001, which cannot be read then: 1000 is sealed with
        // the next key, the others still with the old one.
        let log = SharedText()
        let reads = FailingReads(failing: [file(1001)], errno: EIO)
        let keeper = StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .file)
        let persistence = persistence(keeper, log: log, reads: reads)
        _ = try #require(persistence.store())
        #expect(log.text.contains("could not be finished"))
        #expect(try opens(uid: 1000, with: next) && opens(uid: 1001, with: old))

        // A rekey whose own key change is cut short (1000 cannot be read now) must not have put
        // its key where the next one was: every file opens at the next start; once every file
        // reads, a rekey finishes the change, then makes its own.
        try expectCutShortThenFinished(persistence, reads, unreadable: 1000, old: old, next: next)
    }

    @Test("a rekey cut short is finished by the next rekey before it makes its own key: two rekeys cut short lose no file")
    func rekeyAfterRekeyCutShort() throws {
        let keeper = StorageKeyKeeper(stateDirectory: state, credentialsDirectory: nil, choice: .file)
        let file = { (uid: UInt32) in self.state + "/sessions/\(uid).sessions" }
        let reads = FailingReads(failing: [], errno: EIO)
        let persistence = persistence(keeper, reads: reads)
        let store = try #require(persistence.store())
        for uid: UInt32 in [1000, 1001, 1002] { try store.save([session("\(uid)")], uid: uid) }
        let old = try #require(try keyFile())

        // The first rekey seals 1000 with its key, then cannot read 1001.
        reads.failing.withLock { $0 = [file(1001)] }
        #expect(throws: StorageError.self) { try persistence.rekey() }
        let first = try #require(try keyFile(StorageKey.nextFileName))
        #expect(try opens(uid: 1000, with: first) && opens(uid: 1001, with: old))
        // The second cannot read 1000: it must not have put a key of its own in the first's place.
        try expectCutShortThenFinished(persistence, reads, unreadable: 1000, old: old, next: first)
    }

    @Test("a systemd credential is never rekeyed (the error says how to rotate it); authgate.key.previous opens the old files")
    func credential() throws {
        let credentials = scratch.path + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        let old = StorageKey.generate()
        let new = StorageKey.generate()
        try StorageKey.write(old, to: credentials + "/authgate.key", in: credentials)
        let keeper = StorageKeyKeeper(stateDirectory: state, credentialsDirectory: credentials, choice: .auto, mode: .system)
        let persistence = persistence(keeper)
        try #require(persistence.store()).save([session("a")], uid: 1000)
        #expect {
            try persistence.rekey()
        } throws: { error in
            "\(error)".contains("which authgated can only read") && "\(error)".contains("authgate.key.previous")
        }
        #expect(try opens(uid: 1000, with: old))

        // The rotation the refusal describes: the new credential, the old one as .previous, a restart.
        try StorageKey.write(new, to: credentials + "/authgate.key", in: credentials)
        try StorageKey.write(old, to: credentials + "/authgate.key.previous", in: credentials)
        let restarted = try #require(self.persistence(keeper).store())
        #expect(try opens(uid: 1000, with: new) && !opens(uid: 1000, with: old))
        #expect(restarted.loadAll().sessions[1000] == [session("a")])
        #expect(try keyFile() == nil, "a credential never leaves a key in the state directory")
    }

    @Test("the helper runner: input on stdin, output back, a deadline that kills, a missing program")
    func childProcess() throws {
        let echo = ChildProcess(path: "/bin/cat", arguments: [], environment: []).run(input: Array("secret".utf8), timeout: .seconds(5))
        guard case .exited(0, let output, "") = echo else {
            Issue.record("cat: \(echo)")
            return
        }
        #expect(output == Array("secret".utf8))
        let start = ContinuousClock.now
        let hung = ChildProcess(path: "/bin/sh", arguments: ["-c", "sleep 30 & sleep 30"], environment: []).run(input: [], timeout: .milliseconds(200))
        guard case .timedOut = hung else {
            Issue.record("sleep: \(hung)")
            return
        }
        #expect(ContinuousClock.now - start < .seconds(3))
        guard case .notStarted = ChildProcess(path: "/nonexistent", arguments: [], environment: []).run(input: [], timeout: .seconds(1)) else {
            Issue.record("a missing program starts")
            return
        }
    }
}
