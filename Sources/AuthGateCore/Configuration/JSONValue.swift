public import Foundation

/// A parsed JSON document, kept untyped so that configuration checking can report every
/// problem with its JSON path instead of stopping at the first `DecodingError`.
public enum JSONValue: Sendable, Hashable, Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Parses `data` as one JSON document.
    /// - Throws: ``JSONSyntaxError`` with the parser's own explanation (line and column where
    ///   it has them).
    public static func parse(_ data: Data) throws(JSONSyntaxError) -> JSONValue {
        do {
            return try JSONDecoder().decode(JSONValue.self, from: data)
        } catch let DecodingError.dataCorrupted(context) {
            let detail = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] as? String
            throw JSONSyntaxError(detail: detail ?? context.debugDescription)
        } catch {
            throw JSONSyntaxError(detail: "\(error)")
        }
    }

    /// The JSON type's name, for "expected X, found Y" messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A document that is not valid JSON.
public struct JSONSyntaxError: Error, Sendable {
    public var detail: String
}
