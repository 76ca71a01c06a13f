import AuthGateCore
import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The encrypted session store and its key, on real files in a scratch directory.
@Suite("Session store")
struct SessionStoreTests {
    let scratch: ScratchDirectory
    var state: String { scratch.path + "/state" }

    init() throws {
        scratch = try ScratchDirectory()
    }

    // MARK: - Helpers

    private func session(_ provider: String, _ name: String, token: String, full: Bool) -> PersistedSession {
        let tokens = TokenSet(
            accessToken: Secret("access-\(token)"),
            tokenType: full ? "DPoP" : "Bearer",
            expiresAt: Date(timeIntervalSince1970: 1_800_000_123.25),
            refreshToken: full ? Secret("refresh-\(token)") : nil,
            refreshTokenExpiresAt: full ? Date(timeIntervalSince1970: 1_800_086_400.5) : nil,
            idToken: full ? Secret("idtoken-\(token)") : nil,
            scopes: full ? ["openid", "profile", "offline_access"] : []
        )
        return PersistedSession(
            provider: provider,
            session: name,
            grant: full ? .password : .clientCredentials,
            subject: full ? "user-\(token)" : nil,
            displayName: full ? "name-\(token)" : nil,
            issuer: full ? "https://idp.example/realm" : nil,
            clientID: full ? "authgate" : nil,
            tokens: tokens,
            savedAt: Date(timeIntervalSince1970: 1_799_999_000.125)
        )
    }

    private func makeStore(key: StorageKey? = nil) throws -> SessionStore {
        SessionStore(stateDirectory: state, key: try key ?? StorageKey.load(stateDirectory: state, credentialsDirectory: nil))
    }

    private func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try #require(attributes[.posixPermissions] as? Int) & 0o777
    }

    private func setMode(_ path: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    private func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    private func write(_ bytes: [UInt8], _ path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    private func exists(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: path)
    }

    private func names(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    private func expectRefused(_ message: String, naming path: String, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("expected a StorageError: \(message)")
        } catch let error as StorageError {
            #expect(error.message.contains(path), "\(error.message)")
            #expect(error.message.contains(message), "\(error.message)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    // MARK: - Round trip

    @Test("Two uids with several sessions each come back exactly as saved")
    func roundTrip() throws {
        let store = try makeStore()
        let first = [
            session("mock", "default", token: "a1", full: true),
            session("mock", "work", token: "a2", full: false),
            session("corp", "default", token: "a3", full: true),
        ]
        let second = [session("corp", "ci", token: "b1", full: false)]
        try store.save(first, uid: 1000)
        try store.save(second, uid: 1001)

        let loaded = try makeStore().loadAll()
        #expect(loaded.problems.isEmpty)
        #expect(loaded.sessions == [1000: first, 1001: second])
        let stored = try #require(loaded.sessions[1000]?.first)
        #expect(stored.tokens == first[0].tokens)
        #expect(stored.tokens?.refreshToken?.exposedValue == "refresh-a1")
        #expect(stored.expiresAt == Date(timeIntervalSince1970: 1_800_000_123.25))
        #expect(loaded.sessions[1000]?[1].refreshToken == nil)
        #expect(loaded.sessions[1000]?[1].subject == nil)
        #expect(stored.displayName == "name-a1")
    }

    @Test("A session saved before the display name was kept loads without one")
    func recordWithoutDisplayName() throws {
        let saved = #"""
            {"provider": "lab", "session": "default", "grant": "password", "subject": "1", "access_token": "at", "token_type": "Bearer",
             "expires_at": 1800000000, "scopes": [], "saved_at": 1799999000}
            """#
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let session = try decoder.decode(PersistedSession.self, from: Data(saved.utf8))
        #expect(session.subject == "1" && session.displayName == nil)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        var named = session
        named.displayName = "alice"
        #expect(String(decoding: try encoder.encode(named), as: UTF8.self).contains(#""display_name":"alice""#))
    }

    @Test("TokenSet converts to a PersistedSession and back unchanged (its DPoP key too), and never prints its tokens")
    func tokenConversion() throws {
        var persisted = session("mock", "default", token: "conv", full: true)
        let key = DPoPKey()
        persisted.dpopKey = Base64URL.encode(key.storageRepresentation)
        let tokens = try #require(persisted.tokens)
        #expect(tokens.proofKey?.thumbprint == key.thumbprint)
        let again = PersistedSession(
            provider: "mock",
            session: "default",
            grant: .password,
            subject: persisted.subject,
            displayName: persisted.displayName,
            issuer: persisted.issuer,
            clientID: persisted.clientID,
            tokens: tokens,
            savedAt: persisted.savedAt
        )
        #expect(again == persisted)
        #expect(!"\(persisted)".contains("conv") && !"\(persisted)".contains(persisted.dpopKey ?? "-"))
        persisted.dpopKey = "not-a-key"
        #expect(persisted.tokens == nil, "tokens bound to an unreadable key cannot be used")
        #expect(!String(reflecting: persisted).contains("conv"))
    }

    @Test("A missing sessions directory loads as no sessions and no problems")
    func emptyStore() throws {
        let loaded = try makeStore().loadAll()
        #expect(loaded.sessions.isEmpty)
        #expect(loaded.problems.isEmpty)
    }

    // MARK: - Key

    @Test("The key file is created 0600 in a 0700 directory and reused on the next load")
    func keyCreatedAndReused() throws {
        let first = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil)
        let keyPath = state + "/authgate.key"
        #expect(try mode(state) == 0o700)
        #expect(try mode(keyPath) == 0o600)
        #expect(try bytes(keyPath).count == 32)
        #expect(try names(state) == ["authgate.key"])

        let second = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil)
        #expect(second == first)
        let saved = [session("mock", "default", token: "k", full: true)]
        try SessionStore(stateDirectory: state, key: first).save(saved, uid: 1000)
        let loaded = SessionStore(stateDirectory: state, key: second).loadAll()
        #expect(loaded.problems.isEmpty)
        #expect(loaded.sessions[1000] == saved)
        #expect("\(first)" == "<storage key>")
    }

    @Test("A key in the credentials directory wins, and nothing is created in the state directory")
    func credentialKeyWins() throws {
        let credentials = scratch.path + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false)
        let raw = (0..<32).map { UInt8($0 * 7 + 1) }
        let expected = try #require(StorageKey(rawBytes: raw))

        try write(raw, credentials + "/authgate.key")
        #expect(try StorageKey.load(stateDirectory: state, credentialsDirectory: credentials) == expected)
        #expect(!exists(state))

        try write(Array((Data(raw).base64EncodedString() + "\n").utf8), credentials + "/authgate.key")
        #expect(try StorageKey.load(stateDirectory: state, credentialsDirectory: credentials) == expected)

        let hex = raw.map { String(format: "%02x", $0) }.joined()
        try write(Array((" " + hex + "\n").utf8), credentials + "/authgate.key")
        #expect(try StorageKey.load(stateDirectory: state, credentialsDirectory: credentials) == expected)
        #expect(!exists(state))
        #expect(try names(credentials) == ["authgate.key"])

        try write(Array(raw.prefix(31)), credentials + "/authgate.key")
        expectRefused("neither 32 raw bytes", naming: credentials + "/authgate.key") {
            _ = try StorageKey.load(stateDirectory: state, credentialsDirectory: credentials)
        }
        #expect(!exists(state))
    }

    @Test("A credentials directory without the key falls back to the state directory")
    func credentialsWithoutKey() throws {
        let credentials = scratch.path + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false)
        let key = try StorageKey.load(stateDirectory: state, credentialsDirectory: credentials)
        #expect(exists(state + "/authgate.key"))
        #expect(try names(credentials).isEmpty)
        #expect(try StorageKey.load(stateDirectory: state, credentialsDirectory: nil) == key)
    }

    @Test("A key file of the wrong size, or readable by others, or a symlink, is refused with its name")
    func badKeyFiles() throws {
        let keyPath = state + "/authgate.key"
        _ = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil)

        try setMode(keyPath, 0o644)
        expectRefused("has mode 644", naming: keyPath) { _ = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil) }

        try setMode(keyPath, 0o600)
        try write(Array(repeating: 1, count: 31), keyPath)
        expectRefused("is 31 bytes long", naming: keyPath) { _ = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil) }
        // The refused file is left alone for a person to look at.
        #expect(try bytes(keyPath).count == 31)

        try FileManager.default.removeItem(atPath: keyPath)
        try write(Array(repeating: 1, count: 32), scratch.path + "/elsewhere.key")
        try setMode(scratch.path + "/elsewhere.key", 0o600)
        try FileManager.default.createSymbolicLink(atPath: keyPath, withDestinationPath: scratch.path + "/elsewhere.key")
        expectRefused("symbolic link", naming: keyPath) { _ = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil) }
    }

    // MARK: - Files on disk

    @Test("Files are 0600 in a 0700 directory, start with AGS1 and contain no token in the clear")
    func filesArePrivateAndEncrypted() throws {
        let store = try makeStore()
        try store.save([session("mock", "default", token: "plaintext-canary", full: true)], uid: 1000)
        let file = store.path(uid: 1000)
        #expect(file == state + "/sessions/1000.sessions")
        #expect(try mode(store.directory) == 0o700)
        #expect(try mode(file) == 0o600)
        let contents = try bytes(file)
        #expect(Array(contents.prefix(4)) == Array("AGS1".utf8))
        let text = String(decoding: contents, as: UTF8.self)
        for needle in ["plaintext-canary", "access-", "refresh-", "idtoken-", "access_token", "mock", "openid"] {
            #expect(!text.contains(needle), "\(needle) appears in the file")
        }
    }

    @Test("Saving an empty list deletes the file; no temporary file remains after saves")
    func emptySaveDeletes() throws {
        let store = try makeStore()
        for round in 0..<5 {
            try store.save([session("mock", "default", token: "r\(round)", full: round.isMultiple(of: 2))], uid: 1000)
        }
        try store.save([session("mock", "default", token: "x", full: true)], uid: 1001)
        #expect(try names(store.directory) == ["1000.sessions", "1001.sessions"])

        try store.save([], uid: 1000)
        #expect(try names(store.directory) == ["1001.sessions"])
        try store.delete(uid: 1001)
        try store.delete(uid: 1002)
        #expect(try names(store.directory).isEmpty)
        #expect(store.loadAll().sessions.isEmpty)
    }

    @Test("loadAll removes temporary files left by a crash and ignores other names")
    func strayFiles() throws {
        let store = try makeStore()
        let saved = [session("mock", "default", token: "t", full: true)]
        try store.save(saved, uid: 1000)
        try scratch.write("state/sessions/.1000.sessions.tmp-AbC123", "half-written")
        try scratch.write("state/sessions/.77.sessions.tmp-zzzzzz", "")
        try scratch.write("state/sessions/notes.txt", "hello")
        try scratch.write("state/sessions/01000.sessions", "not canonical")
        try scratch.write("state/sessions/1000.sessions.unreadable", "old")

        let loaded = store.loadAll()
        #expect(loaded.problems.isEmpty)
        #expect(loaded.sessions == [1000: saved])
        #expect(try names(store.directory) == ["01000.sessions", "1000.sessions", "1000.sessions.unreadable", "notes.txt"])
    }

    @Test("Only canonical <uid>.sessions names are session files")
    func fileNames() {
        #expect(SessionStore.uid(fileName: "1000.sessions") == 1000)
        #expect(SessionStore.uid(fileName: "0.sessions") == 0)
        #expect(SessionStore.uid(fileName: "4294967295.sessions") == 4_294_967_295)
        for name in [
            "4294967296.sessions", "01000.sessions", "+1.sessions", ".sessions", "x.sessions",
            "1000.sessions.unreadable", ".1000.sessions.tmp-abcdef", "1000.session", "١.sessions",
        ] {
            #expect(SessionStore.uid(fileName: name) == nil, "\(name)")
        }
    }

    @Test("A sessions directory open to others is refused by save and reported by loadAll")
    func openDirectoryRefused() throws {
        let store = try makeStore()
        try store.save([session("mock", "default", token: "d", full: true)], uid: 1000)
        try setMode(store.directory, 0o755)
        expectRefused("has mode 755", naming: store.directory) {
            try store.save([session("mock", "default", token: "e", full: true)], uid: 1000)
        }
        let loaded = store.loadAll()
        #expect(loaded.sessions.isEmpty)
        #expect(loaded.problems.count == 1)
        #expect(loaded.problems.first?.uid == nil)
        #expect(loaded.problems.first?.reason.contains(store.directory) == true)
        // Nothing was moved aside for a directory problem.
        #expect(exists(store.path(uid: 1000)))
    }

    // MARK: - Damaged files

    enum Corruption: String, CaseIterable, Sendable {
        case truncated, flippedByte, wrongMagic, empty, otherKey, otherUidsFile, tooLarge
        // Encrypted correctly, but the contents are wrong.
        case notJSON, futureVersion, otherUidInside, badField

        /// Part of the reason loadAll should give.
        var expectedReason: String {
            switch self {
            case .truncated, .flippedByte, .otherKey, .otherUidsFile: "cannot be decrypted"
            case .wrongMagic: "does not start with AGS1"
            case .empty: "too short to be a sessions file"
            case .tooLarge: "more than the 16 MiB"
            case .notJSON: "not a valid sessions list (at the top level)"
            case .futureVersion: "format version 2"
            case .otherUidInside: "holds the sessions of uid 1000, not of uid 1001"
            case .badField: "not a valid sessions list (at sessions.0.grant)"
            }
        }
    }

    @Test(
        "A damaged file is reported for its uid only, moved aside, and the next save starts clean",
        arguments: Corruption.allCases
    )
    func damagedFile(_ corruption: Corruption) throws {
        let key = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil)
        let store = try makeStore(key: key)
        let good = [session("mock", "default", token: "good", full: true), session("corp", "x", token: "good2", full: false)]
        let victim = [session("mock", "default", token: "victim", full: true)]
        try store.save(good, uid: 1000)
        try store.save(victim, uid: 1001)
        try store.save(good, uid: 1002)
        let file = store.path(uid: 1001)
        let original = try bytes(file)

        switch corruption {
        case .truncated: try write(Array(original.prefix(original.count - 5)), file)
        case .flippedByte:
            var damaged = original
            damaged[4 + 12 + 3] ^= 0x20  // inside the ciphertext, past magic and nonce
            try write(damaged, file)
        case .wrongMagic:
            var damaged = original
            damaged[3] = UInt8(ascii: "2")
            try write(damaged, file)
        case .empty: try write([], file)
        case .otherKey: try SessionStore(stateDirectory: state, key: .generate()).save(victim, uid: 1001)
        case .otherUidsFile: try write(try bytes(store.path(uid: 1000)), file)
        case .tooLarge: #expect(truncate(file, 16 * 1024 * 1024 + 1) == 0)
        case .notJSON: try write(SealedSessionsFile.fileContents(sealing: Data("victim".utf8), uid: 1001, key: key), file)
        case .futureVersion:
            try write(SealedSessionsFile.fileContents(sealing: Data(#"{"version":2,"victim":true}"#.utf8), uid: 1001, key: key), file)
        case .otherUidInside:
            try write(SealedSessionsFile.fileContents(sealing: Data(#"{"version":1,"uid":1000,"sessions":[]}"#.utf8), uid: 1001, key: key), file)
        case .badField:
            let json =
                #"{"version":1,"uid":1001,"sessions":[{"provider":"mock","session":"default","grant":"victim","#
                + #""access_token":"victim-token","token_type":"Bearer","expires_at":0,"scopes":[],"saved_at":0}]}"#
            try write(SealedSessionsFile.fileContents(sealing: Data(json.utf8), uid: 1001, key: key), file)
        }

        let loaded = store.loadAll()
        #expect(loaded.sessions == [1000: good, 1002: good])
        #expect(loaded.problems.count == 1)
        let problem = try #require(loaded.problems.first)
        #expect(problem.uid == 1001)
        #expect(problem.file == file)
        #expect(problem.reason.contains(file))
        #expect(problem.reason.contains(corruption.expectedReason), "\(problem.reason)")
        #expect(problem.movedTo == file + ".unreadable")
        #expect(!problem.reason.contains("victim") && !problem.reason.contains("good"))
        #expect(!exists(file))
        #expect(exists(file + ".unreadable"))

        // The next start finds nothing wrong, and the uid can save again.
        #expect(store.loadAll().problems.isEmpty)
        let fresh = [session("mock", "default", token: "fresh", full: false)]
        try store.save(fresh, uid: 1001)
        let again = store.loadAll()
        #expect(again.problems.isEmpty)
        #expect(again.sessions == [1000: good, 1001: fresh, 1002: good])
    }

    @Test("A second damaged file is moved aside beside the first; past nine, the newest replaces the ninth")
    func unreadableKept() throws {
        let store = try makeStore()
        try store.save([session("mock", "default", token: "other", full: false)], uid: 1001)
        let aside = store.path(uid: 1000) + ".unreadable"
        for number in 1...11 {
            try scratch.write("state/sessions/1000.sessions", "damaged \(number)")
            let problem = try #require(store.loadAll().problems.first)
            #expect(problem.uid == 1000)
            #expect(problem.movedTo == (number == 1 ? aside : aside + ".\(min(number, 9))"))
        }
        #expect(try String(contentsOfFile: aside, encoding: .utf8) == "damaged 1")
        #expect(try String(contentsOfFile: aside + ".2", encoding: .utf8) == "damaged 2")
        #expect(try String(contentsOfFile: aside + ".9", encoding: .utf8) == "damaged 11")
        #expect(try names(state + "/sessions").count == 1 + 9)
    }

    @Test("A file that cannot be read at start (no descriptor left) is left as it is, never written over, and read at the next save")
    func unreadFileKept() throws {
        let key = try StorageKey.load(stateDirectory: state, credentialsDirectory: nil)
        let saved = [session("mock", "default", token: "saved", full: true)]
        try makeStore(key: key).save(saved, uid: 1001)
        let file = store(key: key).path(uid: 1001)
        let original = try bytes(file)

        let reads = FailingReads(failing: [file], errno: EMFILE)
        let store = SessionStore(stateDirectory: state, key: key, openForReading: reads.open)
        let loaded = store.loadAll()
        let problem = try #require(loaded.problems.first)
        #expect(loaded.sessions.isEmpty && problem.uid == 1001 && problem.movedTo == nil)
        #expect(problem.reason.contains(file) && problem.reason.contains(String(cString: strerror(EMFILE))), "\(problem.reason)")
        #expect(try names(state + "/sessions") == ["1001.sessions"])

        // No save writes over it while it cannot be read.
        let signedInSince = [session("corp", "default", token: "new", full: false)]
        #expect(throws: StorageError.self) { try store.save(signedInSince, uid: 1001) }
        #expect(store.readIfUnread(uid: 1001).map { if case .failure = $0 { true } else { false } } == true)
        #expect(try bytes(file) == original)

        // Once it reads, its sessions come back to be kept, and saves go on.
        reads.failing.withLock { $0 = [] }
        #expect(store.readIfUnread(uid: 1001).map { try? $0.get() } == saved)
        #expect(store.readIfUnread(uid: 1001) == nil)
        try store.save(saved + signedInSince, uid: 1001)
        #expect(store.loadAll().sessions == [1001: saved + signedInSince])
    }

    @Test("A key change stops at a file it cannot read, keeping the old key, so that nothing sealed with it is lost")
    func resealStopsAtUnreadFile() throws {
        let old = StorageKey.generate()
        let new = StorageKey.generate()
        let list = [session("mock", "default", token: "kept", full: true)]
        for uid: UInt32 in [1000, 1001, 1002] { try store(key: old).save(list, uid: uid) }
        let reads = FailingReads(failing: [store(key: old).path(uid: 1001)], errno: EIO)
        let store = SessionStore(stateDirectory: state, key: old, openForReading: reads.open)

        #expect(throws: StorageError.self) { try store.reseal(with: new) }
        reads.failing.withLock { $0 = [] }
        // The old key still opens what the change did not reach; the new one seals from now on.
        #expect(store.loadAll() == ([1000: list, 1001: list, 1002: list], []))
        let report = try store.reseal(with: new)
        #expect(report.files == 3 && report.unreadable.isEmpty)
        #expect(SessionStore(stateDirectory: state, key: new).loadAll() == ([1000: list, 1001: list, 1002: list], []))
    }

    private func store(key: StorageKey) -> SessionStore {
        SessionStore(stateDirectory: state, key: key)
    }

    // MARK: - Concurrency

    @Test("50 concurrent saves for one uid, with loads in between, leave a file equal to one of them")
    func concurrentSaves() async throws {
        let store = try makeStore()
        let versions = (0..<50).map { [session("mock", "default", token: "v\($0)", full: $0.isMultiple(of: 2))] }
        try await withThrowingTaskGroup(of: [StoreProblem].self) { group in
            for version in versions {
                group.addTask {
                    try store.save(version, uid: 1000)
                    return []
                }
            }
            for _ in 0..<10 {
                group.addTask { store.loadAll().problems }
            }
            for try await problems in group {
                #expect(problems.isEmpty)
            }
        }
        let loaded = store.loadAll()
        #expect(loaded.problems.isEmpty)
        let final = try #require(loaded.sessions[1000])
        #expect(versions.contains(final))
        #expect(try names(store.directory) == ["1000.sessions"])
    }
}

/// Opens files for a ``SessionStore`` as `open(2)` does, but fails with `errno` for the paths in
/// `failing`: a busy or failing disk, which root's tests cannot otherwise make.
final class FailingReads: Sendable {
    let failing: Mutex<Set<String>>
    let code: Int32

    init(failing: Set<String>, errno code: Int32) {
        self.failing = Mutex(failing)
        self.code = code
    }

    var open: @Sendable (String) -> Int32 {
        { [self] path in
            guard !failing.withLock({ $0.contains(path) }) else {
                errno = code
                return -1
            }
            return StorageFiles.openFile(path, noFollow: true)
        }
    }
}
