/// Compact JSON text of a ``JSONValue``, written without the Codable coders: the CLI's plain
/// calls (`authgate token`, the credential helpers, kubectl) write their request lines with it,
/// because the coders' first use costs a short-lived process about as much as the rest of its
/// work (docs/BENCHMARKS.md). Members are written in sorted order, as the daemon writes its own
/// answers, so the same value always gives the same bytes.
extension JSONValue {
    /// The value as compact JSON (UTF-8, no whitespace, sorted members).
    public var jsonBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        write(into: &bytes)
        return bytes
    }

    /// Appends the value as compact JSON to `bytes`.
    public func write(into bytes: inout [UInt8]) {
        switch self {
        case .null: bytes += "null".utf8
        case .bool(let value): bytes += (value ? "true" : "false").utf8
        case .number(let value):
            // Integers stay integers on the wire (no "3600.0"), as in `encode(to:)`; JSON has no
            // NaN or infinity.
            if !value.isFinite {
                bytes += "null".utf8
            } else if value.rounded() == value, abs(value) < 1e15 {
                bytes += String(Int64(value)).utf8
            } else {
                bytes += "\(value)".utf8
            }
        case .string(let value): Self.writeString(value, into: &bytes)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                value.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.writeString(key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[key]!.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// `text` as a JSON string literal, escaped byte for byte as the daemon's JSON encoder
    /// escapes it: for the few lines the CLI writes around a value (a helper's answer to git,
    /// docker or kubectl).
    public static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        writeString(text, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A JSON string literal (RFC 8259 §7): the quote, the backslash and control characters
    /// escaped (the short forms where JSON has them, as Foundation's encoder writes them),
    /// everything else as UTF-8.
    package static func writeString(_ text: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += #"\""#.utf8
            case UInt8(ascii: "\\"): bytes += #"\\"#.utf8
            case UInt8(ascii: "\n"): bytes += #"\n"#.utf8
            case UInt8(ascii: "\r"): bytes += #"\r"#.utf8
            case UInt8(ascii: "\t"): bytes += #"\t"#.utf8
            case 0x08: bytes += #"\b"#.utf8
            case 0x0C: bytes += #"\f"#.utf8
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += #"\u00"#.utf8
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
