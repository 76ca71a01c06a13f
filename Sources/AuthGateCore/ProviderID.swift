/// A provider's identifier: the stem of its file in `providers.d` (`corp.json` → `corp`).
///
/// Valid identifiers match `[a-z0-9][a-z0-9_-]*` and are at most 64 characters long, so they
/// are safe in file names, log lines and command lines.
public struct ProviderID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Returns `nil` unless `rawValue` is a valid identifier.
    public init?(_ rawValue: String) {
        guard Self.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    public static func isValid(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard let first = bytes.first, bytes.count <= 64 else { return false }
        func isLowerAlnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
        guard isLowerAlnum(first) else { return false }
        return bytes.allSatisfy { isLowerAlnum($0) || $0 == 0x5F || $0 == 0x2D }
    }

    public init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer().decode(String.self)
        guard let id = ProviderID(value) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a valid provider id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
    public static func < (lhs: ProviderID, rhs: ProviderID) -> Bool { lhs.rawValue < rhs.rawValue }
}
