import AuthGateCore
import Crypto
import FoundationEssentials

/// The storage key in the user's Secret Service (GNOME Keyring, KWallet, KeePassXC: anything
/// that answers `org.freedesktop.secrets` on the session bus), through `secret-tool`.
///
/// Why a child process rather than libsecret in the daemon: libsecret is GLib, and loading it
/// (dlopen or linked) would bring GLib's main loop, its worker threads and its D-Bus stack
/// into a hardened, non-dumpable process that otherwise has none of them, for a call made at
/// start and at `rekey` only. Its synchronous calls also wait as long as a keyring prompt
/// stays open. `secret-tool` (Debian: libsecret-tools) does the same calls in a process of its
/// own that ``ChildProcess`` kills after ``timeout``; the key crosses a pipe, never argv. The
/// cost is one fork and exec per call.
///
/// The key is stored base64-encoded under the attributes `application=authgate`,
/// `kind=storage-key` (`kind=storage-key-next` while a `rekey` is under way), which is how it
/// is looked up again: `secret-tool lookup application authgate kind storage-key`.
struct SecretServiceKeyring: Sendable {
    /// The attribute that names what an item is.
    enum Item: String, Sendable {
        /// The key that seals the sessions.
        case current = "storage-key"
        /// A new key that `rekey` has stored but not yet made current.
        case next = "storage-key-next"
    }

    /// Why the Secret Service could not be used: a sentence for the log, never the key.
    struct Failure: Error, Sendable, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// The `secret-tool` executable.
    let tool: String
    /// The environment `secret-tool` runs with: the daemon's, with the session bus named.
    let environment: [String]
    /// How long one call may take before the child is killed and the call fails: a keyring
    /// that asks to be unlocked with a prompt nobody sees would otherwise hang start-up.
    var timeout: Duration = .seconds(5)

    /// Where the key lives, for the log and `daemon.info`.
    static let locationText = "the Secret Service (application=authgate kind=storage-key)"

    /// The keyring of the session `environment` belongs to, or why there is none: no session
    /// bus (neither `DBUS_SESSION_BUS_ADDRESS` nor `$XDG_RUNTIME_DIR/bus`), or no `secret-tool`.
    /// `AUTHGATE_SECRET_TOOL` names another executable that speaks secret-tool's language.
    static func find(environment: [String: String]) -> Result<SecretServiceKeyring, Failure> {
        let session: DesktopSession
        switch DesktopSession.find(environment: environment) {
        case .success(let found): session = found
        case .failure(let none): return .failure(Failure(none.description))
        }
        let tool: String
        if let explicit = environment["AUTHGATE_SECRET_TOOL"], explicit.hasPrefix("/") {
            tool = explicit
        } else if let found = session.program("secret-tool") {
            tool = found
        } else {
            return .failure(Failure("secret-tool is not installed (Debian: apt install libsecret-tools)"))
        }
        return .success(SecretServiceKeyring(tool: tool, environment: session.environmentLines))
    }

    /// The key stored as `item`; `nil` when there is none.
    func lookup(_ item: Item) -> Result<StorageKey?, Failure> {
        switch call(["lookup", "application", "authgate", "kind", item.rawValue], input: []) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let (status, output, errorText)):
            var output = output
            defer { for index in output.indices { output[index] = 0 } }
            // secret-tool says nothing and exits 1 when no item matches; any failure has a message.
            if status == 1, output.isEmpty, errorText.isEmpty { return .success(nil) }
            guard status == 0 else { return .failure(Self.failed("lookup", status, errorText)) }
            guard let key = Self.decode(output) else {
                return .failure(
                    Failure(
                        "the Secret Service item application=authgate kind=\(item.rawValue) does not hold a storage key "
                            + "(32 bytes in base64); remove it with `secret-tool clear application authgate kind \(item.rawValue)` "
                            + "only if no saved sessions need it"
                    )
                )
            }
            return .success(key)
        }
    }

    /// Stores `key` as `item`, replacing the item that has the same attributes.
    func store(_ key: StorageKey, as item: Item) -> Result<Void, Failure> {
        var encoded = Array(key.symmetricKey.withUnsafeBytes { Data($0) }.base64EncodedString().utf8)
        defer { for index in encoded.indices { encoded[index] = 0 } }
        let label = item == .current ? "authgate storage key" : "authgate storage key (rekey in progress)"
        switch call(["store", "--label=\(label)", "application", "authgate", "kind", item.rawValue], input: encoded) {
        case .failure(let failure): return .failure(failure)
        case .success(let (status, _, errorText)):
            return status == 0 ? .success(()) : .failure(Self.failed("store", status, errorText))
        }
    }

    /// Stores `key` as `item` and reads it back: a keyring that accepted it but hands back
    /// something else (or nothing) must not be trusted with the only copy.
    func storeAndVerify(_ key: StorageKey, as item: Item) -> Result<Void, Failure> {
        if case .failure(let failure) = store(key, as: item) { return .failure(failure) }
        switch lookup(item) {
        case .failure(let failure): return .failure(Failure("the key was stored, but reading it back failed: \(failure)"))
        case .success(let found) where found == key: return .success(())
        case .success: return .failure(Failure("the key was stored, but the Secret Service hands back another one"))
        }
    }

    /// Removes `item`; one that is not there is no failure.
    func clear(_ item: Item) -> Result<Void, Failure> {
        switch call(["clear", "application", "authgate", "kind", item.rawValue], input: []) {
        case .failure(let failure): return .failure(failure)
        case .success(let (status, _, errorText)):
            return status == 0 || (status == 1 && errorText.isEmpty) ? .success(()) : .failure(Self.failed("clear", status, errorText))
        }
    }

    private func call(_ arguments: [String], input: [UInt8]) -> Result<(Int32, [UInt8], String), Failure> {
        switch ChildProcess(path: tool, arguments: arguments, environment: environment).run(input: input, timeout: timeout) {
        case .exited(let status, let output, let errorText):
            return .success((status, output, errorText))
        case .notStarted(let reason):
            return .failure(Failure("\(tool) could not be started: \(reason)"))
        case .timedOut, .cancelled:
            return .failure(
                Failure(
                    "\(tool) \(arguments[0]) did not answer within \(timeout.components.seconds) s "
                        + "(a locked keyring waiting for a password prompt?); it was stopped"
                )
            )
        }
    }

    private static func failed(_ operation: String, _ status: Int32, _ errorText: String) -> Failure {
        // secret-tool's messages are GLib's D-Bus errors: object paths and error names, no secret.
        let detail = errorText.isEmpty ? "" : ": " + String(errorText.prefix(300))
        return Failure("secret-tool \(operation) failed (exit status \(status))\(detail)")
    }

    /// 44 characters of base64, whitespace around them ignored.
    private static func decode(_ bytes: [UInt8]) -> StorageKey? {
        guard bytes.count <= 256, let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let trimmed = text.trimming(while: \.isWhitespace)
        guard trimmed.utf8.count == 44, var data = Data(base64Encoded: trimmed) else { return nil }
        defer { data.resetBytes(in: 0..<data.count) }
        return StorageKey(rawBytes: Array(data))
    }
}
