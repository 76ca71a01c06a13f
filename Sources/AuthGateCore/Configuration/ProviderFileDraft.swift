import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A provider file that `authgate provider add` writes: built from answers, checked by the
/// daemon's own loader, written atomically.
public struct ProviderFileDraft: Sendable {
    public var preset: ProviderPreset?
    public var presetOptions: [String: String] = [:]
    /// `--issuer`: an `oidc` provider unless a preset says otherwise.
    public var issuer: String?
    public var clientID: String?
    /// The file holding the client secret (never the secret itself).
    public var clientSecretFile: String?
    /// `client_auth` with `client_key_file` and `client_key_id`: a private_key_jwt client (a
    /// dynamically registered one's generated key).
    public var clientAuth: String?
    public var clientKeyFile: String?
    public var clientKeyID: String?
    public var grants: [Grant] = []
    public var scopes: [String] = []
    public var caFile: String?
    public var storage: ProviderConfiguration.Storage?
    /// `endpoints.device_authorization`, for a provider whose discovery names none.
    public var deviceEndpoint: String?
    /// `endpoints.revocation` (RFC 7009), for a provider whose discovery names none.
    public var revocationEndpoint: String?
    /// `credential_helper`'s hosts (`host[:port]`), each optionally with a path prefix
    /// (`host/org-a`): the prefixes go to `paths` (one host per file then).
    public var credentialHosts: [String] = []

    /// The file's `"$schema"`, for editors: the installed schema as a `file://` URL; none when
    /// it is not installed.
    public var schema: String?

    public init() {}

    /// The file's JSON: sorted keys, two-space indentation, a final newline.
    public func json() -> String {
        var document: [String: JSONValue] = [:]
        if let schema { document["$schema"] = .string(schema) }
        if let preset {
            document["preset"] = .string(preset.rawValue)
            if !presetOptions.isEmpty { document["preset_options"] = .object(presetOptions.mapValues(JSONValue.string)) }
        } else if issuer != nil {
            document["type"] = .string("oidc")
        }
        if let issuer { document["issuer"] = .string(issuer) }
        if let clientID { document["client_id"] = .string(clientID) }
        if let clientSecretFile { document["client_secret_file"] = .string(clientSecretFile) }
        if let clientAuth { document["client_auth"] = .string(clientAuth) }
        if let clientKeyFile { document["client_key_file"] = .string(clientKeyFile) }
        if let clientKeyID { document["client_key_id"] = .string(clientKeyID) }
        if !grants.isEmpty { document["grants"] = .array(grants.map { .string($0.rawValue) }) }
        if !scopes.isEmpty { document["scopes"] = .array(scopes.map(JSONValue.string)) }
        if let caFile { document["tls"] = .object(["ca_file": .string(caFile)]) }
        if let storage { document["storage"] = .string(storage.rawValue) }
        var endpoints: [String: JSONValue] = [:]
        if let deviceEndpoint { endpoints["device_authorization"] = .string(deviceEndpoint) }
        if let revocationEndpoint { endpoints["revocation"] = .string(revocationEndpoint) }
        if !endpoints.isEmpty { document["endpoints"] = .object(endpoints) }
        if !credentialHosts.isEmpty {
            var hosts: [String] = []
            var paths: [String] = []
            for entry in credentialHosts {
                let parts = entry.split(separator: "/", maxSplits: 1)
                if let host = parts.first.map(String.init), !hosts.contains(host) { hosts.append(host) }
                if parts.count == 2 { paths.append(String(parts[1])) }
            }
            var helper: [String: JSONValue] = ["hosts": .array(hosts.map(JSONValue.string))]
            if !paths.isEmpty { helper["paths"] = .array(paths.map(JSONValue.string)) }
            document["credential_helper"] = .object(helper)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(JSONValue.object(document))) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// Where docs/provider.schema.json is installed below an installation's prefix
    /// (`scripts/install`): the binaries are in `PREFIX/bin`.
    public static let installedSchemaPath = "share/doc/authgate/provider.schema.json"

    /// The file checked as the daemon will check it.
    public func check(id: String, directory: String) -> ProviderFileReport {
        ProviderConfigurationLoader.parse(Data(json().utf8), id: id, file: ProviderFileStore.path(id: id, directory: directory))
    }
}

/// Why a provider file could not be written or removed; `code` is stable.
public struct ProviderFileError: Error, Sendable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var description: String { message }

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// The providers directory on disk, as `authgate provider add/remove` changes it.
public enum ProviderFileStore {
    public static func path(id: String, directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + id + ".json"
    }

    /// Writes `text` as `ID.json` atomically (a temporary file in the same directory, renamed
    /// over), mode 0644; an existing file only with `force`.
    /// - Throws: `provider_file.exists`, `provider_file.unwritable`.
    public static func write(_ text: String, id: ProviderID, directory: String, force: Bool) throws(ProviderFileError) {
        let target = path(id: id.rawValue, directory: directory)
        if !force, FileManager.default.fileExists(atPath: target) {
            throw ProviderFileError("provider_file.exists", "\(target) exists; pass --force to replace it.")
        }
        try atomicWrite(text, to: target, directory: directory, mode: 0o644, replacing: force)
    }

    /// `ID.registration` beside `ID.json`: what `provider remove` needs to delete a dynamically
    /// registered client at the provider (RFC 7592), mode 0600. Not `*.json`, so the daemon does
    /// not read it as a provider.
    public static func registrationPath(id: String, directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + id + ".registration"
    }

    /// `ID.client-secret` beside `ID.json`: the client secret a registration issued, mode 0600.
    public static func clientSecretPath(id: String, directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + id + ".client-secret"
    }

    /// `ID.key` beside `ID.json`: the private key generated for a private_key_jwt client, mode 0600.
    public static func clientKeyPath(id: String, directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + id + ".key"
    }

    /// Writes a secret `text` to `target` (in `directory`) atomically: mode 0600, or 0640 and
    /// the group `readableBy` (root's file for a daemon that runs as another user, as its
    /// documented secret files are). An existing file is replaced only when `replacing`.
    /// - Throws: `provider_file.exists`, `provider_file.unwritable`.
    public static func writePrivate(
        _ text: String,
        to target: String,
        directory: String,
        replacing: Bool,
        readableBy group: UInt32? = nil
    ) throws(ProviderFileError) {
        try atomicWrite(text, to: target, directory: directory, mode: group == nil ? 0o600 : 0o640, group: group, replacing: replacing)
    }

    /// Writes a temporary file in `directory`, then puts it at `target`: `rename` over it when
    /// `replacing`, else `link`, which fails when `target` exists, so that of two concurrent
    /// writers one wins and the other is told (a check for the file, then a `rename`, let both
    /// succeed, one over the other).
    private static func atomicWrite(
        _ text: String,
        to target: String,
        directory: String,
        mode: mode_t,
        group: UInt32? = nil,
        replacing: Bool
    ) throws(ProviderFileError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw ProviderFileError("provider_file.unwritable", "The providers directory \(directory) cannot be created.")
        }
        // Unique per writer (two threads of one process have one pid), created exclusively.
        let temporary =
            (directory.hasSuffix("/") ? directory : directory + "/")
            + ".\(target.split(separator: "/").last ?? "file").\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard descriptor >= 0 else {
            throw ProviderFileError("provider_file.unwritable", "\(directory) is not writable (\(String(cString: strerror(errno)))).")
        }
        // Given its group and mode before anything is in it (the umask cut the open's mode).
        let owned = (group.map { fchown(descriptor, uid_t.max, $0) == 0 } ?? true) && fchmod(descriptor, mode) == 0
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        defer { unlink(temporary) }  // after a rename, nothing is there any more
        guard owned, written == bytes.count, synced else {
            throw ProviderFileError("provider_file.unwritable", "\(target) could not be written (\(String(cString: strerror(errno)))).")
        }
        if replacing ? rename(temporary, target) == 0 : link(temporary, target) == 0 { return }
        if !replacing, errno == EEXIST {
            throw ProviderFileError("provider_file.exists", "\(target) exists (written meanwhile by another command); pass --force to replace it.")
        }
        throw ProviderFileError("provider_file.unwritable", "\(target) could not be written (\(String(cString: strerror(errno)))).")
    }

    /// Deletes `ID.json`.
    /// - Throws: `provider_file.not_found`, `provider_file.unwritable`.
    public static func remove(id: ProviderID, directory: String) throws(ProviderFileError) {
        let target = path(id: id.rawValue, directory: directory)
        guard unlink(target) == 0 else {
            if errno == ENOENT { throw ProviderFileError("provider_file.not_found", "\(target) does not exist.") }
            throw ProviderFileError("provider_file.unwritable", "\(target) could not be removed (\(String(cString: strerror(errno)))).")
        }
    }
}
