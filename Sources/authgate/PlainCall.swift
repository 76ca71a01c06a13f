import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// A call whose answer is read with AuthGateCore's own JSON reader instead of the Codable
/// coders: the helpers git, docker and kubectl run before each request are whole processes,
/// and the coders' first use (type metadata and conformance lookups in the static binary)
/// costs about as much as the rest of the process (docs/BENCHMARKS.md).
enum PlainCall {
    /// The `result` of `method` called with `params`; an error answer is reported as any call's
    /// (CLIError, with its reason and exit status).
    static func result(_ method: RPCMethod, params: [String: JSONValue] = [:], socket: String?) throws -> JSONValue {
        let path = socket ?? SocketLocation.forClient()
        do {
            let connection = try RPCConnection(path: path)
            try connection.send(requestLine(method, params: params))
            guard let reply = try connection.receiveLine() else { throw RPCClientError.protocolError("the daemon closed the connection") }
            if let result = (JSONValue.readPlain(reply) ?? (try? JSONValue.parse(Data(reply))))?.objectValue?["result"] {
                return result
            }
            // An error (or nonsense): the ordinary decoder says which, with the daemon's reason.
            _ = try RPCConnection.decodeReply(reply, id: .number(1), as: JSONValue.self)
            throw RPCClientError.protocolError("the answer has no result")
        } catch let error as RPCClientError {
            throw CLIError(error, json: false)
        }
    }

    /// The request line (newline included) that calls `method` with `params`, as id 1: the
    /// members in sorted order, as the daemon's front door reads a plain call.
    static func requestLine(_ method: RPCMethod, params: [String: JSONValue]) -> [UInt8] {
        var line = JSONValue.object([
            "id": .number(1), "jsonrpc": .string("2.0"), "method": .string(method.rawValue),
            "params": .object(params),
        ]).jsonBytes
        line.append(0x0A)
        return line
    }

    /// ``result(_:params:socket:)`` with the params encoded from their RPC type (for calls
    /// rarer than the helpers' plain ones, where the encoder's first use does not matter).
    static func result<Params: Encodable>(_ method: RPCMethod, _ params: Params, socket: String?) throws -> JSONValue {
        guard let encoded = try? RPCCoding.makeEncoder().encode(params), case .object(let members)? = try? JSONValue.parse(encoded) else {
            throw CLIError(message: "cannot encode the \(method.rawValue) call", exitCode: ExitStatus.internalError)
        }
        return try result(method, params: members, socket: socket)
    }

    /// `2026-11-25T10:04:12Z`, as the daemon writes dates, without Foundation's date parsing
    /// (which loads the time zone database).
    static func utcDate(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
            let minute = number(14..<16), let second = number(17..<19), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// The access token and its expiry (seconds since 1970) from a `token` result.
    static func token(_ result: JSONValue) throws -> (token: String, tokenType: String, expiresAt: Date) {
        guard let object = result.objectValue, let token = object["access_token"]?.stringValue,
            let type = object["token_type"]?.stringValue, let expires = object["expires_at"]?.stringValue,
            let date = utcDate(expires)
        else {
            throw CLIError(message: "unexpected answer from authgated: a token result without its fields", exitCode: ExitStatus.internalError)
        }
        return (token, type, date)
    }
}
