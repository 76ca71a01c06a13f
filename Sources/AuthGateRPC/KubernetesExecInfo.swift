import FoundationEssentials

/// What kubectl says to an exec credential plugin in `KUBERNETES_EXEC_INFO`
/// (client.authentication.k8s.io): the API version it speaks and whether the plugin may
/// interact with the user. Anything else in it is ignored.
public struct KubernetesExecInfo: Decodable, Sendable {
    public struct Spec: Decodable, Sendable {
        public var interactive: Bool?
    }

    public var apiVersion: String?
    public var spec: Spec?

    /// `nil` when the bytes are not such an object.
    public static func parse(_ bytes: [UInt8]) -> KubernetesExecInfo? {
        guard bytes.count <= 64 * 1024 else { return nil }
        return try? JSONDecoder().decode(KubernetesExecInfo.self, from: Data(bytes))
    }
}
