import AuthGateCore
import AuthGateRPC
import Foundation

/// Answer lines for a ``StandInDaemon``, as the daemon's coder writes them.
enum DaemonAnswers {
    /// `value` as the result of the request `id`.
    static func result<Value: Encodable>(_ value: Value, id: String) -> String {
        let encoded = (try? RPCCoding.makeEncoder().encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
        return #"{"jsonrpc":"2.0","id":\#(id),"result":\#(encoded)}"#
    }

    /// The daemon's refusal of the request `id`, with its reason.
    static func error(_ reason: ErrorReason, _ message: String, id: String) -> String {
        let encoded = (try? RPCCoding.makeEncoder().encode(RPCErrorObject(AuthGateError(reason, message)))).map { String(decoding: $0, as: UTF8.self) }
        return #"{"jsonrpc":"2.0","id":\#(id),"error":\#(encoded ?? "null")}"#
    }

    /// `providers.list`'s answer: one provider, `id`, offering `grants`.
    static func providers(_ id: String, type: String = "oauth2", grants: [Grant], requestID: String) -> String {
        let grantList = grants.map { "\"\($0.rawValue)\"" }.joined(separator: ",")
        return
            #"{"jsonrpc":"2.0","id":\#(requestID),"result":[{"id":"\#(id)","display_name":"\#(id)","type":"\#(type)","status":"ready","grants":[\#(grantList)],"registration":false}]}"#
    }
}
