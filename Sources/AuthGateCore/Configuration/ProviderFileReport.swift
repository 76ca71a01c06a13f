/// What became of one file in the providers directory.
public struct ProviderFileReport: Sendable {
    /// The provider id: the file's stem, even when it is not a valid id.
    public var id: String
    /// The file as the admin named it (the directory as given + the file name).
    public var file: String
    public var outcome: Outcome
    /// Things that work but deserve the admin's attention.
    public var warnings: [ConfigProblem]

    public enum Outcome: Sendable {
        case valid(ProviderConfiguration)
        case invalid([ConfigProblem])
    }

    public var configuration: ProviderConfiguration? {
        if case .valid(let configuration) = outcome { configuration } else { nil }
    }

    public var problems: [ConfigProblem] {
        if case .invalid(let problems) = outcome { problems } else { [] }
    }
}

/// The providers directory could not be read at all.
public struct ProvidersDirectoryError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var detail: String
    public var description: String { "\(path): \(detail)" }
}
