/// Strings from outside (providers, socket clients) are data: before a log line or a terminal
/// sees one, its control characters are made visible, so that nobody can forge a journal record
/// (CR LF, NUL), set a terminal's title, write its clipboard (OSC 52) or move its cursor (ESC,
/// C1's CSI U+009B), or reorder what a reader sees (bidirectional overrides).
extension Unicode.Scalar {
    /// C0 (including TAB, LF, CR and NUL), DEL, C1, the line and paragraph separators, and the
    /// bidirectional embeddings, overrides and isolates.
    public var isUnsafeControl: Bool {
        switch value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

extension StringProtocol {
    /// True when a scalar of it is an unsafe control character (``Unicode/Scalar/isUnsafeControl``).
    public var containsControlCharacters: Bool {
        unicodeScalars.contains { $0.isUnsafeControl }
    }

    /// The text with each unsafe control character written as `\u{XX}` (so `"a\r\nb"` becomes
    /// `a\u{D}\u{A}b`); everything else, other languages and emoji included, unchanged.
    public var escapingControlCharacters: String {
        guard containsControlCharacters else { return String(self) }
        var escaped = String.UnicodeScalarView()
        for scalar in unicodeScalars {
            if scalar.isUnsafeControl {
                escaped.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                escaped.append(scalar)
            }
        }
        return String(escaped)
    }
}
