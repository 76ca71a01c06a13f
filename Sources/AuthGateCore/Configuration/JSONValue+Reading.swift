/// JSON text read into a ``JSONValue`` without the Codable coders, the reading half of
/// `JSONValue+Writing.swift`: the CLI's plain calls (the credential helpers, `authgate kubectl`)
/// read the daemon's answer line with it, because `JSONDecoder`'s first use (generic metadata
/// and protocol conformance lookups in the static binary) cost a helper process about a third
/// of its work (docs/BENCHMARKS.md, "Credential helpers as whole processes").
///
/// It reads RFC 8259 JSON exactly as ``parse(_:)`` does, or gives up: anything it does not
/// read (invalid JSON, a duplicate member, nesting deeper than 64, a number outside the
/// plain grammar) is `nil`, and the caller then asks ``parse(_:)``, which reads it or says
/// what is wrong. So it never needs error messages of its own.
extension JSONValue {
    /// `bytes` as one JSON document, surrounding whitespace allowed; `nil` when it is anything
    /// this reader leaves to ``parse(_:)``.
    public static func readPlain(_ bytes: [UInt8]) -> JSONValue? {
        bytes.withUnsafeBufferPointer { buffer in
            var reader = PlainJSONReader(bytes: buffer)
            guard let value = reader.value(depth: 0) else { return nil }
            reader.skipWhitespace()
            return reader.offset == buffer.count ? value : nil
        }
    }
}

/// A cursor over the document's bytes. In the package, a reader that looks for a few members
/// reads the objects on their way with ``members(depth:_:)`` and builds no ``JSONValue`` object
/// for them: `authgate token`'s answer (RPCLine.bareAccessToken), where the first dictionary a
/// process makes would cost a generic-metadata instantiation and a walk through every protocol
/// conformance of the binary (docs/BENCHMARKS.md). It reads what ``JSONValue/readPlain(_:)``
/// reads, duplicate members and depth included.
package struct PlainJSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var offset = 0

    package init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Whether only whitespace is left.
    package mutating func isAtEnd() -> Bool {
        skipWhitespace()
        return offset == bytes.count
    }

    /// An object's members: `visit` gets each key with the reader before its value, which it
    /// reads (or `value(depth:)` skips) and returns whether it did; `false` when `visit` gave up,
    /// a key repeats or the object is not one this reader reads.
    package mutating func members(depth: Int, _ visit: (String, inout PlainJSONReader) -> Bool) -> Bool {
        guard depth < Self.maximumDepth else { return false }
        skipWhitespace()
        guard take(UInt8(ascii: "{")) else { return false }
        // The keys so far, each followed by 0xFF, a byte UTF-8 never has: no array of strings.
        var keys: [UInt8] = []
        skipWhitespace()
        if take(UInt8(ascii: "}")) { return true }
        repeat {
            skipWhitespace()
            guard let key = string(), !Self.contains(key, in: keys) else { return false }
            keys += key.utf8
            keys.append(0xFF)
            skipWhitespace()
            guard take(UInt8(ascii: ":")) else { return false }
            skipWhitespace()
            guard visit(key, &self) else { return false }
            skipWhitespace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}"))
    }

    private static func contains(_ key: String, in keys: [UInt8]) -> Bool {
        var start = 0
        while let end = keys[start...].firstIndex(of: 0xFF) {
            if keys[start..<end].elementsEqual(key.utf8) { return true }
            start = end + 1
        }
        return false
    }

    /// `bytes` as a string when they are valid UTF-8. Decoding replaces an invalid sequence,
    /// so the string's bytes then differ; unlike `String(validating:as:)`, whose generic path
    /// instantiates metadata at run time, this is compiled for UTF-8.
    private static func validUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        let string = String(decoding: bytes, as: UTF8.self)
        return string.utf8.elementsEqual(bytes) ? string : nil
    }

    static let maximumDepth = 64

    private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard current == byte else { return false }
        offset += 1
        return true
    }

    private mutating func take(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard offset + count <= bytes.count else { return false }
        for index in 0..<count where bytes[offset + index] != word.utf8Start[index] { return false }
        offset += count
        return true
    }

    package mutating func value(depth: Int) -> JSONValue? {
        guard depth < Self.maximumDepth else { return nil }
        skipWhitespace()
        switch current {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return take("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return take("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return take("null") ? .null : nil
        default: return number().map(JSONValue.number)
        }
    }

    private mutating func object(depth: Int) -> JSONValue? {
        offset += 1  // {
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if take(UInt8(ascii: "}")) { return .object(members) }
        repeat {
            skipWhitespace()
            guard let key = string() else { return nil }
            skipWhitespace()
            guard take(UInt8(ascii: ":")), let value = value(depth: depth + 1) else { return nil }
            // Which of two equal keys wins is the full parser's business.
            guard members.updateValue(value, forKey: key) == nil else { return nil }
            skipWhitespace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}")) ? .object(members) : nil
    }

    private mutating func array(depth: Int) -> JSONValue? {
        offset += 1  // [
        var items: [JSONValue] = []
        skipWhitespace()
        if take(UInt8(ascii: "]")) { return .array(items) }
        repeat {
            guard let item = value(depth: depth + 1) else { return nil }
            items.append(item)
            skipWhitespace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]")) ? .array(items) : nil
    }

    /// A string literal (RFC 8259 §7), escapes decoded; `nil` for a control character, a bad
    /// escape, a lone surrogate or invalid UTF-8.
    package mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = offset
        // The common case: no escape, the bytes are the string.
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { offset += 1 }
        if take(UInt8(ascii: "\"")) {
            return Self.validUTF8(UnsafeBufferPointer(rebasing: bytes[start..<offset - 1]))
        }
        var decoded = Array(bytes[start..<offset])
        while let byte = current {
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                return decoded.withUnsafeBufferPointer(Self.validUTF8)
            case UInt8(ascii: "\\"):
                guard let escaped = current else { return nil }
                offset += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escaped)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    decoded += String(Character(scalar)).utf8
                default: return nil
                }
            case 0..<0x20:
                return nil
            default:
                decoded.append(byte)
            }
        }
        return nil
    }

    /// The scalar of `XXXX` after `\u` (and of its low surrogate's `\uXXXX`, for a high one).
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let unit = hexQuad() else { return nil }
        switch unit {
        case 0xD800..<0xDC00:
            guard take("\\u"), let low = hexQuad(), (0xDC00..<0xE000).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
        case 0xDC00..<0xE000:
            return nil
        default:
            return Unicode.Scalar(unit)
        }
    }

    private mutating func hexQuad() -> UInt32? {
        guard offset + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            offset += 1
        }
        return value
    }

    /// A number in JSON's grammar (`-`, digits without a leading zero, a fraction, an
    /// exponent) of at most 32 characters.
    private mutating func number() -> Double? {
        let start = offset
        func digits() -> Int {
            let first = offset
            while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { offset += 1 }
            return offset - first
        }
        _ = take(UInt8(ascii: "-"))
        let integerStart = offset
        guard digits() > 0, bytes[integerStart] != UInt8(ascii: "0") || offset - integerStart == 1 else { return nil }
        if take(UInt8(ascii: ".")) { guard digits() > 0 else { return nil } }
        if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
            _ = take(UInt8(ascii: "+")) || take(UInt8(ascii: "-"))
            guard digits() > 0 else { return nil }
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<offset])
        guard offset - start <= 32, let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else { return nil }
        // Below the normal range (1e-400 is refused by the decoder as not representable) is
        // left to the decoder; a zero only when every digit before the exponent is one.
        if value == 0 {
            guard
                text.prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }).allSatisfy({
                    $0 == UInt8(ascii: "0") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
                })
            else { return nil }
        } else if value.magnitude < Double.leastNormalMagnitude {
            return nil
        }
        return value
    }
}
