/// Where a session stands (the `state` of `status` and `login`).
public enum SessionState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Holds a valid access token.
    case authenticated
    /// A refresh is in flight; the current token (if still valid) is served meanwhile.
    case refreshing
    /// The access token expired and a refresh is pending or being retried.
    case expired
    /// No usable tokens: the user must sign in again.
    case loginRequired = "login_required"
    // A signed-out session is gone, not in a state: `status` no longer lists it, and a watch
    // gets `session.ended` with the reason `logged_out`.
}

/// Where a provider stands after validation (the `status` of `providers.list`).
public enum ProviderStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Checked and usable.
    case ready
    /// The file is valid but its endpoints have not been checked over the network.
    case unchecked
    /// The file is valid but the provider could not be reached; retried in the background.
    case unreachable
    /// The file has problems; fixed only by editing it and reloading.
    case invalid
}

/// The name of one of a user's sessions at one provider; `default` unless the caller names one.
public struct SessionName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let `default` = SessionName(validated: "default")
    public let rawValue: String

    private init(validated: String) { rawValue = validated }

    /// Returns `nil` unless `rawValue` is 1–64 characters of `[A-Za-z0-9._-]`.
    public init?(_ rawValue: String) {
        guard !rawValue.isEmpty, rawValue.utf8.count <= 64,
            rawValue.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) })
        else { return nil }
        self.rawValue = rawValue
    }

    public var description: String { rawValue }
    public static func < (lhs: SessionName, rhs: SessionName) -> Bool { lhs.rawValue < rhs.rawValue }
}
