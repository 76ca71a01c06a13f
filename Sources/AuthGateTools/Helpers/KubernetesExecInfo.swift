import AuthGateCore
import FoundationEssentials

/// What kubectl says to an exec credential plugin in `KUBERNETES_EXEC_INFO`
/// (client.authentication.k8s.io): the API version it speaks and whether the plugin may
/// interact with the user. Anything else in it is ignored. Read with AuthGateCore's JSON
/// reader, not the Codable coders, whose first use would cost the plugin's process as much
/// as the rest of it.
public struct KubernetesExecInfo: Sendable {
    public var apiVersion: String?
    /// `spec.interactive`.
    public var interactive: Bool?

    /// What kubectl told this process (`KUBERNETES_EXEC_INFO`); `nil` when it told nothing, or
    /// nothing ``parse(_:)`` reads.
    package static func fromEnvironment() -> KubernetesExecInfo? {
        ProcessEnvironment.value("KUBERNETES_EXEC_INFO").flatMap { parse(Array($0.utf8)) }
    }

    /// `nil` when the bytes are not a JSON object (or are over 64 KiB).
    public static func parse(_ bytes: [UInt8]) -> KubernetesExecInfo? {
        guard bytes.count <= 64 * 1024, let object = (try? JSONValue.parse(Data(bytes)))?.objectValue else { return nil }
        var interactive: Bool?
        if case .bool(let value)? = object["spec"]?.objectValue?["interactive"] { interactive = value }
        return KubernetesExecInfo(apiVersion: object["apiVersion"]?.stringValue, interactive: interactive)
    }
}
