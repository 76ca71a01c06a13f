/// The rules a new password must meet (`password_policy` of a mock provider).
///
/// The default follows NIST SP 800-63B's emphasis on length: at least 10 characters, with a
/// letter and a digit, and not containing the username.
public struct PasswordPolicy: Sendable, Hashable {
    public var minimumLength: Int
    public var maximumLength: Int
    public var requireLetter: Bool
    public var requireDigit: Bool
    public var requireUppercase: Bool
    public var requireSymbol: Bool

    public init(
        minimumLength: Int = 10,
        maximumLength: Int = 128,
        requireLetter: Bool = true,
        requireDigit: Bool = true,
        requireUppercase: Bool = false,
        requireSymbol: Bool = false
    ) {
        self.minimumLength = minimumLength
        self.maximumLength = maximumLength
        self.requireLetter = requireLetter
        self.requireDigit = requireDigit
        self.requireUppercase = requireUppercase
        self.requireSymbol = requireSymbol
    }

    /// What `password` lacks, one phrase each; empty when it is acceptable.
    public func violations(of password: String, username: String) -> [String] {
        var result: [String] = []
        if password.count < minimumLength { result.append("must be at least \(minimumLength) characters long") }
        if password.count > maximumLength { result.append("must be at most \(maximumLength) characters long") }
        if requireLetter, !password.contains(where: \.isLetter) { result.append("must contain a letter") }
        if requireDigit, !password.contains(where: \.isNumber) { result.append("must contain a digit") }
        if requireUppercase, !password.contains(where: \.isUppercase) { result.append("must contain an uppercase letter") }
        if requireSymbol, !password.contains(where: { !$0.isLetter && !$0.isNumber && !$0.isWhitespace }) {
            result.append("must contain a symbol")
        }
        if username.count >= 3, password.lowercased().contains(username.lowercased()) {
            result.append("must not contain the username")
        }
        return result
    }

    static func read(_ reader: ObjectReader) -> PasswordPolicy {
        reader.rejectUnknownKeys(
            allowed: ["min_length", "max_length", "require_letter", "require_digit", "require_uppercase", "require_symbol"],
            context: "password_policy"
        )
        var policy = PasswordPolicy()
        policy.minimumLength = reader.integer("min_length", in: 1...1024) ?? policy.minimumLength
        policy.maximumLength = reader.integer("max_length", in: 1...4096) ?? policy.maximumLength
        policy.requireLetter = reader.bool("require_letter") ?? policy.requireLetter
        policy.requireDigit = reader.bool("require_digit") ?? policy.requireDigit
        policy.requireUppercase = reader.bool("require_uppercase") ?? policy.requireUppercase
        policy.requireSymbol = reader.bool("require_symbol") ?? policy.requireSymbol
        if policy.minimumLength > policy.maximumLength {
            reader.add("min_length", "must not exceed max_length (\(policy.maximumLength))")
        }
        return policy
    }
}

/// A deliberately simple email check: something@domain.tld, no spaces, one `@`.
public enum EmailAddress {
    public static func isPlausible(_ value: String) -> Bool {
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, value.count <= 254,
            !value.contains(where: { $0.isWhitespace || $0.isNewline })
        else { return false }
        let labels = parts[1].split(separator: ".", omittingEmptySubsequences: false)
        return labels.count >= 2 && labels.allSatisfy { !$0.isEmpty && !$0.hasPrefix("-") && !$0.hasSuffix("-") }
    }
}
