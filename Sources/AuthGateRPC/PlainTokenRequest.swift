/// A request for a token in the plain shape that clients send, read by a scanner that
/// allocates nothing but the two names. Either a `token` call:
///
///     {"id":7,"jsonrpc":"2.0","method":"token","params":{"provider":"corp"}}
///
/// with an optional `session`, `min_valid_seconds` (0…86400) and `"force_refresh":false`; or a
/// `credential.get` call as git's and docker's helpers write it (``RPCLine/request(_:params:)``
/// with ``CredentialParams/plainParams``):
///
///     {"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"git.example.com","min_valid_seconds":60,"tool":"git"}}
///
/// with exactly `host`, `tool` and an optional `min_valid_seconds`; both in any key order and
/// spacing. Anything else — another method or member, an escape sequence, non-ASCII text, a
/// number that is not a plain integer, a repeated key — is not recognized, and the line goes to
/// the full JSON decoder, which answers it or says precisely what is wrong. So this scanner
/// never has to be right about errors, only about the lines it accepts, and for those it reads
/// exactly what the decoder would. The request reader of ``RPCLine``, for the daemon's front door.
public struct PlainTokenRequest: Sendable {
    /// Whose token is asked for.
    public enum Target: Sendable, Equatable {
        /// `token`: a session of a provider.
        case session(provider: String, session: String?)
        /// `credential.get`: the default session of the provider that lists `host` for `tool`
        /// (both as sent; ``CredentialRoutes`` reads them).
        case credential(host: String, tool: String)

        /// The method the line calls.
        public var method: RPCMethod {
            switch self {
            case .session: .token
            case .credential: .credentialGet
            }
        }
    }

    /// The `id` exactly as sent (a canonical integer, or a string with its quotes), echoed
    /// into the answer; both forms mean the same to a JSON reader as the decoder's re-encoding.
    public var id: [UInt8]
    public var target: Target
    public var minimumValidity: Int?

    public init?(_ bytes: UnsafeRawBufferPointer) {
        var scanner = Scanner(bytes: bytes)
        var id: [UInt8]?
        var sawVersion = false
        var method: String?
        var params: Params?
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        repeat {
            guard let key = scanner.key() else { return nil }
            switch key {
            case "jsonrpc":
                guard !sawVersion, scanner.string().map(scanner.text) == "2.0" else { return nil }
                sawVersion = true
            case "id":
                guard id == nil, let range = scanner.peek == UInt8(ascii: "\"") ? scanner.quotedString() : scanner.integer() else { return nil }
                id = Array(bytes[range])
            case "method":
                guard method == nil, let range = scanner.string() else { return nil }
                method = scanner.text(range)
            case "params":
                guard params == nil, let read = Params(&scanner) else { return nil }
                params = read
            default:
                return nil
            }
        } while scanner.take(UInt8(ascii: ","))
        guard scanner.take(UInt8(ascii: "}")), scanner.atEnd, sawVersion, let method, let id, let params else { return nil }
        switch (method, params.provider, params.host, params.tool) {
        case ("token", let provider?, nil, nil):
            target = .session(provider: provider, session: params.session)
        case ("credential.get", nil, let host?, let tool?) where params.session == nil && !params.sawForceRefresh:
            target = .credential(host: host, tool: tool)
        default:
            return nil
        }
        self.id = id
        minimumValidity = params.minimumValidity
    }

    /// The members of either call's params, each at most once: which call may have which is
    /// decided once the method is known (it may come after the params).
    private struct Params {
        var provider: String?
        var session: String?
        var host: String?
        var tool: String?
        var minimumValidity: Int?
        var sawForceRefresh = false

        init?(_ scanner: inout Scanner) {
            guard scanner.take(UInt8(ascii: "{")) else { return nil }
            repeat {
                guard let key = scanner.key() else { return nil }
                switch key {
                case "provider":
                    guard provider == nil, let range = scanner.string() else { return nil }
                    provider = scanner.text(range)
                case "session":
                    guard session == nil, let range = scanner.string() else { return nil }
                    session = scanner.text(range)
                case "host":
                    guard host == nil, let range = scanner.string() else { return nil }
                    host = scanner.text(range)
                case "tool":
                    guard tool == nil, let range = scanner.string() else { return nil }
                    tool = scanner.text(range)
                case "min_valid_seconds":
                    guard minimumValidity == nil, let range = scanner.integer(), let value = Int(scanner.text(range)),
                        TokenParams.minimumValidityRange.contains(value)
                    else { return nil }
                    minimumValidity = value
                case "force_refresh":
                    guard !sawForceRefresh, scanner.literal("false") else { return nil }
                    sawForceRefresh = true
                default:
                    return nil
                }
            } while scanner.take(UInt8(ascii: ","))
            guard scanner.take(UInt8(ascii: "}")) else { return nil }
        }
    }
}

/// A cursor over the line. Every reader skips the JSON whitespace before what it reads.
private struct Scanner {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    var peek: UInt8? {
        mutating get {
            skipWhitespace()
            return index < bytes.count ? bytes[index] : nil
        }
    }

    var atEnd: Bool {
        mutating get { peek == nil }
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        index += 1
        return true
    }

    /// A member name and its colon.
    mutating func key() -> String? {
        guard let range = string(), take(UInt8(ascii: ":")) else { return nil }
        return text(range)
    }

    /// A string's contents: printable ASCII without escapes, or `nil`.
    mutating func string() -> Range<Int>? {
        guard let quoted = quotedString() else { return nil }
        return quoted.lowerBound + 1..<quoted.upperBound - 1
    }

    /// A string with its quotes.
    mutating func quotedString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index - 1
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { return start..<index }
            guard (0x20...0x7E).contains(byte), byte != UInt8(ascii: "\\") else { return nil }
        }
        return nil
    }

    /// `-?(0|[1-9][0-9]*)` of at most 18 digits (so that it fits an Int64), not followed by a
    /// fraction or an exponent; `-0` is left to the decoder.
    mutating func integer() -> Range<Int>? {
        skipWhitespace()
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        let digits = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        let count = index - digits
        guard (1...18).contains(count), count == 1 || bytes[digits] != UInt8(ascii: "0"),
            !(digits > start && bytes[digits] == UInt8(ascii: "0"))
        else { return nil }
        if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) { return nil }
        return start..<index
    }

    mutating func literal(_ word: StaticString) -> Bool {
        skipWhitespace()
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
            word.withUTF8Buffer({ $0.elementsEqual(bytes[index..<index + count]) })
        else { return false }
        index += count
        return true
    }

    func text(_ range: Range<Int>) -> String {
        String(decoding: bytes[range], as: UTF8.self)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index].isJSONWhitespace { index += 1 }
    }
}
