import AuthGateCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `docker-credential configure|unconfigure REGISTRY`: the registry's entry in the
/// `credHelpers` of docker's configuration (`$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`), written or removed with the rest of the file kept, atomically and
/// idempotently.
package enum DockerConfiguration {
    package static var file: String {
        let directory = ProcessEnvironment.value("DOCKER_CONFIG").flatMap { $0.isEmpty ? nil : $0 } ?? (ProcessEnvironment.value("HOME") ?? "/") + "/.docker"
        return directory + "/config.json"
    }

    /// Writes or removes the entry in `file`.
    /// - Returns: What was done (or that nothing needed doing), for the user.
    package static func apply(configure: Bool, registry text: String, file path: String = file) throws -> String {
        guard let registry = CredentialHost.normalize(text) else {
            throw ToolFailure(
                "\(Terminal.safe(text)) is not a registry: give host or host:port, without a scheme or path [invalid_params]",
                status: ToolFailure.inputRefused
            )
        }
        var document: [String: JSONValue] = [:]
        if let data = FileManager.default.contents(atPath: path) {
            guard data.count <= 1 << 20, case .object(let object)? = try? JSONValue.parse(data) else {
                throw ToolFailure(
                    "\(Terminal.safe(path)) is not a JSON object docker wrote: nothing was changed [invalid_params]",
                    status: ToolFailure.inputRefused
                )
            }
            document = object
        }
        var helpers = document["credHelpers"]?.objectValue ?? [:]
        let current = helpers[registry]?.stringValue
        if configure {
            guard current != "authgate" else { return "\(path) already sends docker to authgate for \(registry)." }
            helpers[registry] = .string("authgate")
        } else {
            guard current == "authgate" else { return "\(path) has no authgate entry for \(registry): nothing to remove." }
            helpers[registry] = nil
        }
        document["credHelpers"] = .object(helpers)
        try write(JSONValue.object(document), to: path)
        return configure
            ? "\(path): docker asks docker-credential-authgate for \(registry) (credHelpers)."
            : "\(path): removed the credHelpers entry for \(registry)."

    }

    /// Writes `document` (indented, as docker does) to `path` through a temporary file renamed
    /// over it; the directory is made (0700) when missing, the file keeps its mode (0600 when new).
    private static func write(_ document: JSONValue, to path: String) throws {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if access(directory, F_OK) != 0, mkdir(directory, 0o700) != 0 {
            throw ToolFailure(
                "cannot create \(Terminal.safe(directory)): \(String(cString: strerror(errno))) [internal_error]",
                status: ToolFailure.internalError
            )
        }
        var info = stat()
        let mode = stat(path, &info) == 0 ? info.st_mode & 0o777 : 0o600
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let bytes = Array((try encoder.encode(document)) + Data("\n".utf8))
        let temporary = path + ".authgate-\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw ToolFailure(
                "cannot write \(Terminal.safe(path)): \(String(cString: strerror(errno))) [internal_error]",
                status: ToolFailure.internalError
            )
        }
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw ToolFailure(
                "cannot write \(Terminal.safe(path)): \(String(cString: strerror(errno))) [internal_error]",
                status: ToolFailure.internalError
            )
        }
    }
}
