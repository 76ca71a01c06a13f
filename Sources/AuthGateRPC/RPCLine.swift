public import AuthGateCore
import FoundationEssentials

/// The JSON-RPC line in both directions, written and read in this one place (docs/RPC.md): the
/// request a client writes, the success answer the daemon writes around a result that is JSON
/// already, and the fast forms that read them without the JSON coders — ``PlainTokenRequest``
/// for the daemon's front door, ``bareAccessToken(in:)`` and ``result(in:)`` for the CLI's
/// helpers, whole processes for which the coders' first use would cost as much as the rest
/// (docs/BENCHMARKS.md). Whatever a fast form accepts, the JSON decoder reads the same way (the
/// `rpc-line` and `watch-line` fuzz targets check it); what it does not accept goes to the
/// decoder (``RPCConnection/decodeReply(_:id:as:)``), which answers it or says what is wrong.
public enum RPCLine {
    /// The id of a client's one call on a connection: its answer is the line that echoes it.
    public static let clientID = RPCID.number(1)

    /// The request line (newline included) that calls `method` with `params`, as id 1, its
    /// members in sorted order: the shape ``PlainTokenRequest`` reads.
    public static func request(_ method: RPCMethod, params: [String: JSONValue]) -> [UInt8] {
        var line = JSONValue.object([
            "id": .number(1), "jsonrpc": .string("2.0"), "method": .string(method.rawValue), "params": .object(params),
        ]).jsonBytes
        line.append(0x0A)
        return line
    }

    /// The request line that calls `method` with one string parameter, written without a
    /// dictionary: the bytes of ``request(_:params:)`` for `[name: .string(value)]`, for
    /// `authgate token PROVIDER`, a whole process whose first dictionary would cost it a
    /// generic-metadata instantiation and a walk through every protocol conformance of the
    /// binary (docs/BENCHMARKS.md).
    public static func request(_ method: RPCMethod, parameter name: String, _ value: String) -> [UInt8] {
        var params: [UInt8] = [UInt8(ascii: "{")]
        JSONValue.writeString(name, into: &params)
        params.append(UInt8(ascii: ":"))
        JSONValue.writeString(value, into: &params)
        params.append(UInt8(ascii: "}"))
        return request(method, encodedParams: params)
    }

    /// The request line that calls `method` with params that are JSON already (encoded from
    /// their RPC type), as id 1.
    public static func request(_ method: RPCMethod, encodedParams: some Sequence<UInt8>) -> [UInt8] {
        var line = Array(#"{"id":1,"jsonrpc":"2.0","method":""#.utf8)
        line += method.rawValue.utf8  // method names need no escaping
        line += #"","params":"#.utf8
        line += encodedParams
        line += "}\n".utf8
        return line
    }

    // MARK: Success answers

    /// `{"id":` ID `,"jsonrpc":"2.0","result":` RESULT `}` and a newline: the daemon's success
    /// answer, written around an id and a result that are JSON already. The cached path and
    /// the dispatcher both write it, so the same call gets the same bytes either way.
    public static let successOpening: StaticString = #"{"id":"#
    public static let successMiddle: StaticString = #","jsonrpc":"2.0","result":"#
    public static let successClosing: StaticString = "}\n"
    /// The bytes a success answer adds besides the id and the result.
    public static let successFramingLength =
        successOpening.utf8CodeUnitCount + successMiddle.utf8CodeUnitCount + successClosing.utf8CodeUnitCount

    public static func success(id: [UInt8], result: [UInt8], into bytes: inout [UInt8]) {
        append(successOpening, to: &bytes)
        bytes += id
        append(successMiddle, to: &bytes)
        bytes += result
        append(successClosing, to: &bytes)
    }

    // MARK: Error answers

    /// The daemon's error answer to the request with `id` (`nil`: a line it could not read),
    /// newline included: the dispatcher's, and the socket server's own (a line too long, too
    /// many connections).
    public static func error(_ error: AuthGateError, id: RPCID?) -> [UInt8] {
        var line =
            (try? RPCCoding.makeEncoder().encode(RPCErrorResponse(id: id, error: RPCErrorObject(error)))).map(Array.init)
            ?? Array(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#.utf8)
        line.append(0x0A)
        return line
    }

    // MARK: Reading answers

    /// The access token of the answer to a `token` call with id 1, read by AuthGateCore's
    /// plain reader (no Codable coder: docs/BENCHMARKS.md); `nil` for anything else (an error
    /// answer, another id, a line the plain reader declines), which the JSON decoder then reads.
    /// The whole line is read: a line that merely starts like an answer is not one (the
    /// `watch-line` fuzz target found that a prefix match took a broken line's first word).
    /// The objects are read member by member (``PlainJSONReader/members(depth:_:)``), not
    /// built: as for the request, no dictionary.
    public static func bareAccessToken(in reply: [UInt8]) -> String? {
        reply.withUnsafeBufferPointer { bytes -> String? in
            var reader = PlainJSONReader(bytes: bytes)
            var isFirstCall = false
            var token: String?
            let read = reader.members(depth: 0) { key, reader in
                switch key {
                case "id":
                    guard let id = reader.value(depth: 1) else { return false }
                    isFirstCall = id == .number(1)
                    return true
                case "error":
                    return false
                case "result":
                    return reader.members(depth: 1) { key, reader in
                        guard key == "access_token" else { return reader.value(depth: 2) != nil }
                        token = reader.string()
                        return token != nil
                    }
                default:
                    return reader.value(depth: 1) != nil
                }
            }
            guard read, reader.isAtEnd(), isFirstCall else { return nil }
            return token
        }
    }

    /// The `result` of an answer line, read by AuthGateCore's plain reader (the JSON parser when
    /// the plain reader declines); `nil` for an error answer or nonsense, which
    /// ``RPCConnection/decodeReply(_:id:as:)`` then reports with the daemon's reason.
    public static func result(in reply: [UInt8]) -> JSONValue? {
        (JSONValue.readPlain(reply) ?? (try? JSONValue.parse(Data(reply))))?.objectValue?["result"]
    }

    private static func append(_ text: StaticString, to bytes: inout [UInt8]) {
        bytes += UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
    }
}

extension UInt8 {
    /// JSON's insignificant whitespace (RFC 8259 §2).
    public var isJSONWhitespace: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }
}
