import AuthGateCore
public import FoundationEssentials

/// What the proxy forwards, and how a request's and an answer's header fields change on the
/// way. Pure: the rules are tested in process (ForwardingRulesTests).
///
/// - Only to the one upstream: an origin-form target (`/path?query`) gets the upstream's scheme,
///   host, port and path prefix put in front; an absolute-form target is taken only when it
///   names the upstream's origin. Any other origin, `CONNECT` and `*` are refused: the proxy
///   is not an open proxy. A protocol upgrade (WebSocket) goes to the same upstream, with the
///   same fields, keeping only `Connection: Upgrade` and `Upgrade` of the hop-by-hop ones.
/// - Hop-by-hop fields (RFC 9110 §7.6.1: `Connection` and every field it names, `Keep-Alive`,
///   `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`, and the
///   `Proxy-Authorization`/`Proxy-Authenticate` of this hop) are not passed on in either
///   direction; the framing of each side is its own.
/// - `Host` becomes the upstream's (libcurl sets it from the URL); an incoming `Authorization`
///   or `DPoP` is dropped, never passed on: the session's own are added.
public enum ForwardingRules {
    /// The fields of RFC 9110 §7.6.1 and their common companions, in lower case.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authorization", "proxy-authenticate",
    ]

    /// Fields of a request the proxy sets itself: the upstream's `Host`, the session's
    /// `Authorization` and `DPoP`, and the framing libcurl writes (`Content-Length`, `Expect`,
    /// which the proxy answered to the client itself).
    static let replacedInRequests: Set<String> = ["host", "authorization", "dpop", "content-length", "expect"]

    /// Where a request goes, or why it is refused.
    public enum Target: Equatable, Sendable {
        case forward(URL)
        case refuse(ProxyAnswer)
    }

    /// The upstream URL for a request line's method and target.
    public static func target(method: String, uri: String, upstream: UpstreamOrigin) -> Target {
        switch method.uppercased() {
        case "CONNECT": return .refuse(.connectRefused(upstream))
        case "TRACE": return .refuse(.traceRefused)
        default: break
        }
        if uri.hasPrefix("/") {
            guard !hasDotSegments(uri) else { return .refuse(.dotSegments) }
            guard let url = URL(string: upstream.origin + upstream.pathPrefix + uri) else { return .refuse(.badTarget) }
            return .forward(url)
        }
        guard let url = URL(string: uri), url.scheme != nil, url.host != nil else { return .refuse(.badTarget) }
        guard upstream.isSameOrigin(url) else { return .refuse(.otherOrigin(upstream)) }
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        guard !hasDotSegments(path) else { return .refuse(.dotSegments) }
        let query = url.query(percentEncoded: true).map { "?" + $0 } ?? ""
        guard let forwarded = URL(string: upstream.origin + upstream.pathPrefix + path + query) else { return .refuse(.badTarget) }
        return .forward(forwarded)
    }

    /// Whether a target's path has a `.` or `..` segment that libcurl or the upstream could
    /// resolve, leaving `--upstream`'s path prefix: also percent-encoded (`%2e`), with path
    /// parameters (`..;x`, which Tomcat and servers like it resolve), or behind a separator a
    /// server may decode or take as one (`..%2fadmin`, `..%5c`, a backslash). A segment that
    /// only holds an encoded slash (`group%2Fproject`, as GitLab's API names projects) goes on.
    static func hasDotSegments(_ target: String) -> Bool {
        let path = target.prefix { $0 != "?" && $0 != "#" }
        return path.split(separator: "/", omittingEmptySubsequences: false).contains { segment in
            percentDecoded(segment).split(omittingEmptySubsequences: false) { $0 == "/" || $0 == "\\" }.contains { piece in
                let name = piece.prefix { $0 != ";" }
                return name == "." || name == ".."
            }
        }
    }

    /// `%XX` decoded (once) to its byte; anything else as it is, as bytes (a malformed escape
    /// stays as it was).
    private static func percentDecoded(_ segment: Substring) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(segment.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count, let high = hexValue(utf8[index + 1]), let low = hexValue(utf8[index + 2]) {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A request's header fields as they go upstream, without what the proxy replaces.
    public static func requestFields(_ fields: [(name: String, value: String)]) -> [(name: String, value: String)] {
        let dropped = hopByHop.union(replacedInRequests).union(connectionOptions(fields))
        return fields.filter { !dropped.contains($0.name.lowercased()) }
    }

    /// An answer's header fields as they go to the client: the upstream's framing is replaced
    /// by the client connection's, except `Content-Length`, which is kept — unless a
    /// `Transfer-Encoding` came too, which overrides it (RFC 9112 §6.3: an intermediary removes
    /// it), since the body is passed on as decoded from that encoding, of whatever length.
    public static func answerFields(_ fields: [(name: String, value: String)]) -> [(name: String, value: String)] {
        var dropped = hopByHop.union(connectionOptions(fields))
        if fields.contains(where: { $0.name.lowercased() == "transfer-encoding" }) { dropped.insert("content-length") }
        return fields.filter { !dropped.contains($0.name.lowercased()) }
    }

    /// Whether a request asks to switch protocols (RFC 9110 §7.8): an `Upgrade` field, and
    /// `Connection` naming it, as a sender must.
    public static func isUpgrade(_ fields: [(name: String, value: String)]) -> Bool {
        fields.contains { $0.name.lowercased() == "upgrade" } && connectionOptions(fields).contains("upgrade")
    }

    /// An upgrade request's fields as they go upstream: ``requestFields(_:)``, then
    /// `Connection: Upgrade` and the client's `Upgrade` (the two hop-by-hop fields an upgrade
    /// must pass on, RFC 9110 §7.8).
    public static func upgradeRequestFields(_ fields: [(name: String, value: String)]) -> [(name: String, value: String)] {
        requestFields(fields) + [(name: "Connection", value: "Upgrade")]
            + fields.filter { $0.name.lowercased() == "upgrade" }.map { (name: "Upgrade", value: $0.value) }
    }

    /// A 101's fields as they go to the client: ``answerFields(_:)``, then `Connection: Upgrade`
    /// and the upstream's `Upgrade` (the protocol it switched to).
    public static func upgradeAnswerFields(_ fields: [(name: String, value: String)]) -> [(name: String, value: String)] {
        answerFields(fields) + [(name: "Connection", value: "Upgrade")]
            + fields.filter { $0.name.lowercased() == "upgrade" }.map { (name: "Upgrade", value: $0.value) }
    }

    /// The field names a `Connection` field lists (RFC 9110 §7.6.1), in lower case.
    static func connectionOptions(_ fields: [(name: String, value: String)]) -> Set<String> {
        var names: Set<String> = []
        for field in fields where field.name.lowercased() == "connection" {
            for option in field.value.split(separator: ",") {
                names.insert(String(option).trimming(while: \.isWhitespace).lowercased())
            }
        }
        return names
    }

    /// The request body's length as the client framed it: `nil` for none, -1 for chunked.
    public static func bodyLength(_ fields: [(name: String, value: String)]) -> Int64? {
        if fields.contains(where: { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) { return -1 }
        guard let length = fields.first(where: { $0.name.lowercased() == "content-length" }).flatMap({ Int64($0.value.trimming(while: \.isWhitespace)) }),
            length > 0
        else { return nil }
        return length
    }
}
