import AuthGateCore
public import AuthGateRPC
public import FoundationEssentials

/// What a token file holds (`authgate sink --format`, `authgate exec --token-file`): the
/// bytes for one token, made the same way every time.
///
/// `nginx` and `env` put the token into another program's syntax (inside its quotes), so they take only
/// tokens of RFC 6750's `b64token` characters (letters, digits, `-._~+/` and trailing `=`),
/// which is what JWTs and the usual opaque tokens are; a token with anything else (a quote, a
/// `$`, a space) is refused rather than written where it could end the string early.
public enum TokenFileFormat: Sendable {
    /// The bare token and a newline.
    case raw
    /// `Authorization: TYPE TOKEN` and a newline.
    case header
    /// The token result (without the ID token) as one line of JSON.
    case json
    /// `proxy_set_header Authorization "TYPE TOKEN";`, an nginx include for a `location`.
    case nginx
    /// `NAME='TOKEN'`, for systemd's `EnvironmentFile=` or a shell's `set -a; . FILE`.
    case env(name: String)
    /// A file of the user's with `{{placeholders}}` (see ``TokenTemplate``).
    case template(TokenTemplate)

    /// Why a token cannot be written in a format.
    public struct Refusal: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// The file's contents for `token`, at `now` (for `{{expires_in}}`).
    public func render(_ token: TokenResult, now: Date = Date()) throws(Refusal) -> [UInt8] {
        let value = token.accessToken.exposedValue
        switch self {
        case .raw:
            return Array((value + "\n").utf8)
        case .header:
            return Array("Authorization: \(token.tokenType) \(value)\n".utf8)
        case .json:
            // The same members every time: a token result without the ID token.
            let bare = TokenResult(
                accessToken: token.accessToken,
                tokenType: token.tokenType,
                expiresAt: token.expiresAt,
                scopes: token.scopes,
                idToken: nil
            )
            guard let encoded = try? RPCCoding.makeEncoder().encode(bare) else { throw Refusal(description: "the token result cannot be encoded") }
            return Array(encoded) + [UInt8(ascii: "\n")]
        case .nginx:
            try Self.checkPlain(value, for: "nginx")
            try Self.checkPlain(token.tokenType, for: "nginx", what: "token type")
            return Array("proxy_set_header Authorization \"\(token.tokenType) \(value)\";\n".utf8)
        case .env(let name):
            try Self.checkPlain(value, for: "env")
            // Quoted: a shell's `. FILE` expands a `~` at the start of an unquoted value and
            // after a `:` in an assignment, and b64token allows `~`; systemd's
            // EnvironmentFile= removes single quotes too.
            return Array("\(name)='\(value)'\n".utf8)
        case .template(let template):
            return Array(template.render(token, now: now).utf8)
        }
    }

    /// Whether `name` may name an environment variable: letters, digits and `_`, not starting with a digit.
    public static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(0x30...0x39).contains(first) else { return false }
        return name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    /// RFC 6750 §2.1 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
    static func isPlain(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let body = bytes.prefix { $0 != UInt8(ascii: "=") }
        guard !body.isEmpty, bytes[body.count...].allSatisfy({ $0 == UInt8(ascii: "=") }) else { return false }
        return body.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || Array("-._~+/".utf8).contains(byte)
        }
    }

    private static func checkPlain(_ text: String, for format: String, what: String = "token") throws(Refusal) {
        guard isPlain(text) else {
            throw Refusal(
                description: "the \(what) holds characters the \(format) format cannot write (only letters, digits, -._~+/ and a trailing =)"
            )
        }
    }
}

/// A template for a token file: text with placeholders, read once at start.
///
/// The syntax is the placeholders and nothing else: `{{token}}` (the access token),
/// `{{token_type}}` (`Bearer` or `DPoP`), `{{expires_at}}` (the expiry, RFC 3339 in UTC, e.g.
/// `2026-11-25T23:30:00Z`) and `{{expires_in}}` (whole seconds from the write to the expiry).
/// Spaces inside the braces are allowed (`{{ token }}`). There are no conditions, loops,
/// filters or commands; every other `{{…}}` is refused when the template is read, with its
/// line, and so is a `{{` that is not closed, and a template without `{{token}}`.
public struct TokenTemplate: Sendable, Equatable {
    public enum Placeholder: String, Sendable, CaseIterable {
        case token
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case expiresIn = "expires_in"
    }

    enum Part: Sendable, Equatable {
        case text(String)
        case placeholder(Placeholder)
    }

    /// A template that cannot be used.
    public struct Problem: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    let parts: [Part]

    /// The placeholders the template uses, in order.
    public var placeholders: [Placeholder] {
        parts.compactMap { if case .placeholder(let placeholder) = $0 { placeholder } else { nil } }
    }

    public init(parsing text: String) throws(Problem) {
        var parts: [Part] = []
        var rest = Substring(text)
        var line = 1
        while let open = rest.firstRange(of: "{{") {
            let before = rest[..<open.lowerBound]
            line += before.count { $0 == "\n" }
            if !before.isEmpty { parts.append(.text(String(before))) }
            let afterOpen = rest[open.upperBound...]
            guard let close = afterOpen.firstRange(of: "}}") else {
                throw Problem(description: "line \(line): a {{ is not closed by }}")
            }
            let inside = afterOpen[..<close.lowerBound]
            let name = String(inside.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
            guard let placeholder = Placeholder(rawValue: name) else {
                let known = Placeholder.allCases.map { "{{\($0.rawValue)}}" }.joined(separator: ", ")
                let shown = String(name.unicodeScalars.prefix(40).map { $0.value >= 0x20 && $0.value != 0x7F ? Character($0) : "?" })
                throw Problem(description: "line \(line): unknown placeholder {{\(shown)}}; a template knows \(known) only")
            }
            parts.append(.placeholder(placeholder))
            line += afterOpen[..<close.lowerBound].count { $0 == "\n" }
            rest = afterOpen[close.upperBound...]
        }
        if !rest.isEmpty { parts.append(.text(String(rest))) }
        // A template without the token writes the same file every time: a file named by
        // mistake (or on purpose: root's sink would copy it to the service) is not a template.
        guard parts.contains(.placeholder(.token)) else { throw Problem(description: "it has no {{token}}") }
        self.parts = parts
    }

    /// The text with each placeholder replaced.
    public func render(_ token: TokenResult, now: Date = Date()) -> String {
        parts.map { part in
            switch part {
            case .text(let text): text
            case .placeholder(.token): token.accessToken.exposedValue
            case .placeholder(.tokenType): token.tokenType
            case .placeholder(.expiresAt): token.expiresAt.formatted(.iso8601)
            case .placeholder(.expiresIn): String(max(0, Int(token.expiresAt.timeIntervalSince(now).rounded(.down))))
            }
        }.joined()
    }
}
