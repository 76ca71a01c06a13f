public import AuthGateCore
public import FoundationEssentials

/// A JSON-RPC request id: a number or a string (JSON-RPC 2.0 §4).
public enum RPCID: Sendable, Hashable, Codable {
    case number(Int64)
    case string(String)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let number = try? container.decode(Int64.self) {
            self = .number(number)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .number(let number): try container.encode(number)
        case .string(let string): try container.encode(string)
        }
    }
}

/// The envelope of a request: what every request has besides its params (the daemon reads
/// both in one pass, see its DecodedRequest).
///
/// `hasID` tells a request (which gets an answer, even when its id is `null`) from a
/// notification (which does not: JSON-RPC 2.0 §4.1).
public struct RPCRequestEnvelope: Sendable, Decodable {
    public var jsonrpc: String?
    public var id: RPCID?
    public var hasID: Bool
    public var method: String?

    private enum CodingKeys: String, CodingKey { case jsonrpc, id, method }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        jsonrpc = try? container.decodeIfPresent(String.self, forKey: .jsonrpc)
        hasID = container.contains(.id)
        id = try? container.decodeIfPresent(RPCID.self, forKey: .id)
        method = try? container.decodeIfPresent(String.self, forKey: .method)
    }
}

/// A request as a client sends it.
public struct RPCRequest<Params: Encodable>: Encodable {
    public var jsonrpc = "2.0"
    public var id: RPCID
    public var method: String
    public var params: Params

    public init(id: RPCID, method: RPCMethod, params: Params) {
        self.id = id
        self.method = method.rawValue
        self.params = params
    }
}

/// The `error` member of a response (JSON-RPC 2.0 §5.1) with authgate's `data`.
public struct RPCErrorObject: Sendable, Codable, Error, CustomStringConvertible {
    public var code: Int
    public var message: String
    public var data: ErrorData?

    /// authgate's details: the stable reason, a sentence for a person, refused fields.
    public struct ErrorData: Sendable, Codable {
        public var reason: String
        public var message: String
        public var fields: [FieldError]?
        public var retryAfterSeconds: Int?

        private enum CodingKeys: String, CodingKey {
            case reason, message, fields
            case retryAfterSeconds = "retry_after_seconds"
        }
    }

    public init(_ error: AuthGateError) {
        code = error.reason.rpcCode
        message = error.message
        data = ErrorData(
            reason: error.reason.rawValue,
            message: error.message,
            fields: error.fields.isEmpty ? nil : error.fields,
            retryAfterSeconds: error.retryAfterSeconds
        )
    }

    /// The reason, from `data.reason` or else from the code.
    public var reason: ErrorReason {
        data.flatMap { ErrorReason(rawValue: $0.reason) } ?? ErrorReason(rpcCode: code) ?? .internalError
    }

    public var description: String { data?.message ?? message }
}

/// An error response as the daemon writes it. (Successful results are spliced into the line
/// as already-encoded JSON, so they need no type here.)
public struct RPCErrorResponse: Encodable {
    public var jsonrpc = "2.0"
    public var id: RPCID?
    public var error: RPCErrorObject

    private enum CodingKeys: String, CodingKey { case jsonrpc, id, error }

    public init(id: RPCID?, error: RPCErrorObject) {
        self.id = id
        self.error = error
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jsonrpc, forKey: .jsonrpc)
        // JSON-RPC 2.0 §5: the id is required in a response, null when it could not be read.
        if let id { try container.encode(id, forKey: .id) } else { try container.encodeNil(forKey: .id) }
        try container.encode(error, forKey: .error)
    }
}

/// A response as a client reads it.
public struct RPCResponseEnvelope<Result: Decodable>: Decodable {
    public var id: RPCID?
    public var result: Result?
    public var error: RPCErrorObject?
}

/// `{}`: params of methods that take none, and results that carry nothing.
public struct EmptyResult: Sendable, Codable {
    public init() {}
}

/// The JSON coders both sides use: dates as RFC 3339 strings in UTC, keys sorted for stable
/// output.
public enum RPCCoding {
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// Requests are one line each and at most this long, newline included.
    public static let maximumLineLength = 64 * 1024

    /// The longest answer a client reads: `status` lists every session of the caller (about
    /// 250 bytes each; an administrator's `--all`, everyone's), which only the daemon can make long.
    public static let maximumResponseLength = 64 * 1024 * 1024
}
