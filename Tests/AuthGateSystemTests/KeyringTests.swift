import AuthGateTestSupport
import Foundation
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// A session bus of its own (dbus-daemon on a socket in a fresh HOME's runtime directory),
/// stopped with the test: what the keyring and the notification tests run their servers on.
final class PrivateSessionBus: Sendable {
    let home: ScratchDirectory
    let address: String
    private let bus: Process

    init() throws {
        home = try ScratchDirectory()
        let runtime = home.path + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        address = "unix:path=\(runtime)/bus"
        bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--session", "--address=\(address)", "--nofork", "--nopidfile", "--print-address=1"]
        bus.environment = ProcessInfo.processInfo.environment.merging(["HOME": home.path, "XDG_RUNTIME_DIR": runtime]) { _, new in new }
        let printed = Pipe()
        bus.standardOutput = printed
        bus.standardError = FileHandle.nullDevice
        try bus.run()
        // The bus prints its address once it listens.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = printed.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw TestFailure("dbus-daemon exited before listening") }
            line += chunk
        }
    }

    /// What a program of this session has in its environment.
    var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address, "HOME": home.path, "XDG_RUNTIME_DIR": home.path + "/run"] }

    /// Whether `name` has an owner on the bus (asked without activating anything).
    func hasOwner(_ name: String) throws -> Bool {
        try run(
            URL(fileURLWithPath: "/usr/bin/dbus-send"),
            ["--session", "--print-reply", "--dest=org.freedesktop.DBus", "/", "org.freedesktop.DBus.NameHasOwner", "string:\(name)"],
            environment: ["DBUS_SESSION_BUS_ADDRESS": address]
        ).stdout.contains("boolean true")
    }

    deinit {
        // SIGKILL: it inherits the test thread's signal mask, in which SIGTERM may be blocked.
        kill(bus.processIdentifier, SIGKILL)
        bus.waitUntilExit()
    }
}

/// A session bus of its own with an unlocked gnome-keyring-daemon on it (a fresh HOME, so a
/// new login keyring), stopped with the test. scripts/test installs dbus, gnome-keyring and
/// libsecret-tools.
final class KeyringSession: Sendable {
    static let programs = ["/usr/bin/dbus-daemon", "/usr/bin/dbus-send", "/usr/bin/gnome-keyring-daemon", "/usr/bin/secret-tool"]
    static var isAvailable: Bool { programs.allSatisfy(FileManager.default.isExecutableFile(atPath:)) }

    let bus: PrivateSessionBus
    private let keyring: Process

    init() throws {
        bus = try PrivateSessionBus()
        keyring = Process()
        keyring.executableURL = URL(fileURLWithPath: "/usr/bin/gnome-keyring-daemon")
        // --unlock reads the login keyring's password from stdin and, with a fresh HOME,
        // creates the keyring with it: no prompt.
        keyring.arguments = ["--unlock", "--components=secrets", "--foreground"]
        keyring.environment = ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new }
        let password = Pipe()
        keyring.standardInput = password
        keyring.standardOutput = FileHandle.nullDevice
        keyring.standardError = FileHandle.nullDevice
        try keyring.run()
        password.fileHandleForWriting.write(Data("keyring-test-password".utf8))
        try password.fileHandleForWriting.close()

        // Ready once it owns org.freedesktop.secrets.
        let bus = bus
        do {
            try eventually(timeout: .seconds(20)) {
                guard keyring.isRunning else { return false }
                return try bus.hasOwner("org.freedesktop.secrets")
            }
        } catch {
            throw TestFailure("gnome-keyring-daemon did not come up")
        }
    }

    /// What a daemon of this session has in its environment.
    var environment: [String: String] { bus.environment }
    var home: ScratchDirectory { bus.home }

    /// `secret-tool` in this session.
    func secretTool(_ arguments: [String]) throws -> ProcessOutput {
        try run(URL(fileURLWithPath: "/usr/bin/secret-tool"), arguments, environment: environment)
    }

    /// The key the keyring holds as `kind`, decoded; `nil` when there is none.
    func storedKey(kind: String = "storage-key") throws -> StorageKey? {
        let found = try secretTool(["lookup", "application", "authgate", "kind", kind])
        guard found.status == 0, let data = Data(base64Encoded: found.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        return StorageKey(rawBytes: Array(data))
    }

    deinit {
        // SIGKILL: it inherits the test thread's signal mask, in which SIGTERM may be blocked,
        // and nothing of it needs keeping. The bus goes after it.
        kill(keyring.processIdentifier, SIGKILL)
        keyring.waitUntilExit()
    }
}

/// The environment of a daemon started where there is no session bus at all.
let withoutSessionBus = ["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": ""]

/// The mock provider, with sessions kept on disk.
private let persistentMock = #"""
    {"type": "mock", "storage": "persistent", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": 3600}
    """#

/// Signs the demo user in, and returns the session's token.
private func signIn(_ daemon: DaemonProcess) throws -> String {
    try daemon.signIn()
    let token = try daemon.cli(["token", "mock"])
    #expect(token.status == 0)
    return token.stdout
}

private func restart(_ daemon: DaemonProcess, arguments: [String], environment: [String: String]) throws -> DaemonProcess {
    daemon.send(SIGTERM)
    _ = try daemon.waitForExit()
    let next = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: arguments, scratch: daemon.scratch, environment: environment)
    try next.waitForLog("saved sessions restored")
    return next
}

private func opens(_ daemon: DaemonProcess, with key: StorageKey) throws -> Bool {
    let uid = getuid()
    let file = daemon.stateDirectory + "/sessions/\(uid).sessions"
    let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
    if case .success = SealedSessionsFile.open(bytes, uid: uid, key: key, file: file) { return true }
    return false
}

private func fileKeyExists(_ daemon: DaemonProcess) -> Bool {
    FileManager.default.fileExists(atPath: daemon.stateDirectory + "/authgate.key")
}

extension StorageKeyKeeper {
    /// Stores `key` in the test session's keyring as the daemon would.
    static func storeInKeyring(_ key: StorageKey, kind: String = "storage-key", keyring session: KeyringSession) throws {
        guard
            case .success(let keyring) = SecretServiceKeyring.find(
                environment: ProcessInfo.processInfo.environment.merging(session.environment) { _, new in new }
            ),
            case .success = keyring.storeAndVerify(key, as: SecretServiceKeyring.Item(rawValue: kind) ?? .current)
        else {
            throw TestFailure("cannot store a key in the test keyring")
        }
    }
}

private func fileKey(_ daemon: DaemonProcess) -> StorageKey? {
    (try? Data(contentsOf: URL(fileURLWithPath: daemon.stateDirectory + "/authgate.key"))).flatMap { StorageKey(rawBytes: Array($0)) }
}

/// The storage key in a real Secret Service (gnome-keyring-daemon on a private session bus),
/// the fallback to the state directory without one, and `authgate rekey` in both.
@Suite("Storage key in the Secret Service", .serialized)
struct KeyringTests {
    static let needsKeyring = Testing.ConditionTrait.enabled(
        if: KeyringSession.isAvailable,
        "needs dbus-daemon, gnome-keyring-daemon and secret-tool (scripts/test installs them)"
    )
    let auto = ["--key-store", "auto"]

    @Test(
        "the key lives in the keyring, not beside the sessions; a restart restores them; a copy of the state directory opens nothing",
        KeyringTests.needsKeyring
    )
    func keyInKeyring() throws {
        let keyring = try KeyringSession()
        var daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: keyring.environment)
        let token = try signIn(daemon)
        #expect(!FileManager.default.fileExists(atPath: daemon.stateDirectory + "/authgate.key"))
        let key = try #require(try keyring.storedKey(), "secret-tool finds the key")
        #expect(try opens(daemon, with: key))
        try daemon.waitForLog("a new storage key was created in the Secret Service")
        #expect(try daemon.cli(["info", "--json"]).stdout.contains(#""storage_key":"secret-service""#))

        daemon = try restart(daemon, arguments: auto, environment: keyring.environment)
        try daemon.waitForLog("sessions.restored=1")
        #expect(try daemon.cli(["token", "mock"]).stdout == token, "the same token, with no sign-in")
        #expect(!daemon.logText.contains(token.trimmingCharacters(in: .newlines)))
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()

        // A backup of the state directory, opened where that keyring is not.
        let copy = try ScratchDirectory()
        let copied = try run(URL(fileURLWithPath: "/bin/cp"), ["-a", daemon.stateDirectory, copy.path + "/state"])
        #expect(copied.status == 0)
        let elsewhere = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, scratch: copy, environment: withoutSessionBus)
        try elsewhere.waitForLog("not creating a new key")
        #expect(try elsewhere.cli(["token", "mock"]).status == 3)
        #expect(!FileManager.default.fileExists(atPath: copy.path + "/state/authgate.key"))
    }

    @Test(
        "a key file from before is replaced by a new key in the keyring: the sessions are sealed again with it, the file goes, and a copy of the old file opens nothing written after",
        KeyringTests.needsKeyring
    )
    func migration() throws {
        let keyring = try KeyringSession()
        var daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: withoutSessionBus)
        let token = try signIn(daemon)
        try daemon.waitForLog("the Secret Service cannot be used: there is no session bus")
        let old = try #require(fileKey(daemon))

        daemon = try restart(daemon, arguments: auto, environment: keyring.environment)
        try daemon.waitForLog("was moved from")
        try daemon.waitForLog("storage key change finished")
        let moved = try #require(try keyring.storedKey())
        #expect(moved != old, "the keyring holds a new key, not the file's")
        #expect(fileKey(daemon) == nil)
        #expect(try daemon.cli(["token", "mock"]).stdout == token)
        #expect(try opens(daemon, with: moved) && !opens(daemon, with: old), "the old file's key opens nothing sealed after the move")
        // A session written after the move is sealed with the keyring's key only.
        _ = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin", "--session", "later"], stdin: "demo-password-1\n")
        #expect(try opens(daemon, with: moved) && !opens(daemon, with: old))
    }

    @Test(
        "sessions sealed with a file key while the keyring was away are sealed again with the keyring's, and the file goes",
        KeyringTests.needsKeyring
    )
    func keyringAndFile() throws {
        let keyring = try KeyringSession()
        var daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: withoutSessionBus)
        let token = try signIn(daemon)
        let oldFileKey = try #require(fileKey(daemon))
        let keyringKey = StorageKey.generate()
        try StorageKeyKeeper.storeInKeyring(keyringKey, keyring: keyring)

        daemon = try restart(daemon, arguments: auto, environment: keyring.environment)
        try daemon.waitForLog("both the Secret Service and")
        try daemon.waitForLog("storage key change finished")
        #expect(try opens(daemon, with: keyringKey) && !opens(daemon, with: oldFileKey))
        #expect(fileKeyExists(daemon) == false)
        #expect(try daemon.cli(["token", "mock"]).stdout == token)
    }

    @Test(
        "a rekey in the keyring interrupted after its new key was stored and one file sealed is finished at the next start",
        KeyringTests.needsKeyring
    )
    func interruptedKeyringRekey() throws {
        let keyring = try KeyringSession()
        var daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: keyring.environment)
        let token = try signIn(daemon)
        let old = try #require(try keyring.storedKey())
        daemon.send(SIGTERM)
        _ = try daemon.waitForExit()
        // What a crash between steps 2 and 3 leaves: the next key in the keyring, the file sealed with it.
        let new = StorageKey.generate()
        try StorageKeyKeeper.storeInKeyring(new, kind: "storage-key-next", keyring: keyring)
        let store = SessionStore(stateDirectory: daemon.stateDirectory, key: new, openingKeys: [old])
        try store.reseal(with: new)

        daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, scratch: daemon.scratch, environment: keyring.environment)
        try daemon.waitForLog("interrupted rekey is finished")
        try daemon.waitForLog("sessions.restored=1")
        #expect(try keyring.storedKey() == new)
        #expect(try keyring.storedKey(kind: "storage-key-next") == nil)
        #expect(try daemon.cli(["token", "mock"]).stdout == token)
    }

    @Test("without a session bus the key is the state directory's file, with a notice")
    func fallback() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: withoutSessionBus)
        _ = try signIn(daemon)
        try daemon.waitForLog("the Secret Service cannot be used: there is no session bus")
        try daemon.waitForLog("the storage key is kept in \(daemon.stateDirectory)/authgate.key instead")
        let key = try #require(fileKey(daemon))
        #expect(try opens(daemon, with: key))
        #expect(try daemon.cli(["info", "--json"]).stdout.contains(#""storage_key":"file""#))
    }

    @Test("rekey in the keyring: sessions survive it and a restart; the old key opens nothing; no next key is left", KeyringTests.needsKeyring)
    func rekeyInKeyring() throws {
        let keyring = try KeyringSession()
        var daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: keyring.environment)
        let token = try signIn(daemon)
        let old = try #require(try keyring.storedKey())
        let rekey = try daemon.cli(["rekey"])
        #expect(rekey.status == 0, "\(rekey.stderr)")
        #expect(rekey.stdout.contains("Sealed 1 session in 1 file under a new key, kept in the Secret Service."))
        let new = try #require(try keyring.storedKey())
        #expect(new != old)
        #expect(try keyring.storedKey(kind: "storage-key-next") == nil)
        #expect(try opens(daemon, with: new) && !opens(daemon, with: old))
        #expect(try daemon.cli(["token", "mock"]).stdout == token)
        daemon = try restart(daemon, arguments: auto, environment: keyring.environment)
        try daemon.waitForLog("sessions.restored=1")
        #expect(try daemon.cli(["token", "mock"]).stdout == token)
    }

    @Test("rekey of the state directory's key: sessions survive it and a restart; the old key opens nothing")
    func rekeyFile() throws {
        var daemon = try DaemonProcess(providers: ["mock.json": persistentMock], arguments: auto, environment: withoutSessionBus)
        let token = try signIn(daemon)
        let old = try #require(fileKey(daemon))
        let rekey = try daemon.cli(["rekey", "--json"])
        #expect(rekey.status == 0, "\(rekey.stderr)")
        #expect(rekey.stdout.contains(#""storage_key":"file""#) && rekey.stdout.contains(#""sessions":1"#))
        let new = try #require(fileKey(daemon))
        #expect(new != old)
        #expect(try opens(daemon, with: new) && !opens(daemon, with: old))
        daemon = try restart(daemon, arguments: auto, environment: withoutSessionBus)
        try daemon.waitForLog("sessions.restored=1")
        #expect(try daemon.cli(["token", "mock"]).stdout == token)
        #expect(!daemon.logText.contains("saved sessions lost"))
    }

    @Test(
        "only admins may rekey",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "needs root and setpriv to run a client as another uid"
        )
    )
    func adminOnly() throws {
        let daemon = try DaemonProcess(
            providers: ["mock.json": persistentMock],
            arguments: ["--socket-group", "nogroup"] + auto,
            environment: withoutSessionBus
        )
        _ = try signIn(daemon)
        let old = try #require(fileKey(daemon))
        chmod(daemon.scratch.path, 0o755)
        let refused = try daemon.cli(["rekey"], prefix: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        #expect(refused.status == 8)
        #expect(refused.stderr.contains("[permission_denied]"))
        #expect(fileKey(daemon) == old)
    }
}
