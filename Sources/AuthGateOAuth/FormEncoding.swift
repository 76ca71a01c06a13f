import AuthGateCore

/// `application/x-www-form-urlencoded` (the only body OAuth token endpoints must accept).
package enum FormEncoding {
    /// Percent-encodes everything but the RFC 3986 unreserved characters.
    static func escape(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// Decodes one form-encoded name or value: `+` is a space, `%XX` a byte. `nil` for a
    /// broken escape or bytes that are not UTF-8.
    package static func unescape(_ value: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        var rest = value.utf8[...]
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = rest.popFirst()?.hexDigitValue, let low = rest.popFirst()?.hexDigitValue else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        Array(fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&").utf8)
    }
}

private extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
