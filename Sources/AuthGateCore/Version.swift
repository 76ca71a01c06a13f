/// The version of authgate, reported by `daemon.info` and `--version`.
public enum AuthGateVersion {
    public static let current = "0.1.0"
}
