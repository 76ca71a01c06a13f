import FoundationEssentials

/// A secret string (token, password, client secret) that never prints itself.
///
/// `description`, `debugDescription` and string interpolation all give `<redacted>`, so a
/// secret that slips into a log line or an error message leaks nothing. Read the value only
/// where it must leave the process: ``exposedValue``.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself. Every use is a place where the secret leaves our control.
    public let exposedValue: String

    public init(_ value: String) {
        self.exposedValue = value
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }

    /// Compares in time independent of where the first difference is.
    public func constantTimeEquals(_ other: String) -> Bool {
        let a = Array(exposedValue.utf8)
        let b = Array(other.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    /// A new random secret: `bytes` random bytes, base64url without padding, after `prefix`.
    public static func random(prefix: String = "", bytes: Int = 32) -> Secret {
        var generator = SystemRandomNumberGenerator()
        let raw = (0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Secret(prefix + Base64URL.encode(raw))
    }
}

/// Base64url without padding (RFC 4648 §5), as used in OAuth tokens and PKCE: Foundation's
/// base64 with the two URL-safe letters and no `=`.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
    }

    /// The bytes of base64url text with or without padding; `nil` for anything else.
    public static func decode(_ text: String) -> [UInt8]? {
        var standard = text.replacing("-", with: "+").replacing("_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }
}

extension UInt8 {
    /// The value of this ASCII hex digit (either case), or `nil` for any other byte.
    package var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension String {
    /// Without the leading and trailing characters that match `predicate` (FoundationEssentials,
    /// which every module uses, lacks `trimmingCharacters(in:)`).
    package func trimming(while predicate: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !predicate($0) }), let last = lastIndex(where: { !predicate($0) }) else { return "" }
        return String(self[first...last])
    }

    /// Without leading and trailing characters from `characters`.
    package func trimming(_ characters: String) -> String {
        trimming { characters.contains($0) }
    }
}
