public import AuthGateCore
public import AuthGateRPC

// Calls whose answers are read with AuthGateCore's own JSON reader (or not parsed at all)
// instead of the Codable coders: the credential helpers git, docker and kubectl run before each
// request are whole processes, and the coders' first use (type metadata and conformance lookups
// in a static binary) costs about as much as the rest of such a process (docs/BENCHMARKS.md).

extension AuthGateClient {
    /// The `result` of `method` called with `params`, as a JSON value; an error answer is
    /// thrown with the daemon's reason, as any call's.
    public func plainResult(_ method: RPCMethod, params: [String: JSONValue] = [:]) throws(RPCClientError) -> JSONValue {
        let connection = try RPCConnection(path: socketPath)
        try connection.send(RPCLine.request(method, params: params))
        guard let reply = try connection.receiveLine() else { throw .protocolError("the daemon closed the connection") }
        if let result = RPCLine.result(in: reply) { return result }
        // An error (or nonsense): the ordinary decoder says which, with the daemon's reason.
        _ = try Self.decodeReply(reply, as: JSONValue.self)
        throw .protocolError("the answer has no result")
    }

    /// The reply line to the plain `token` request for `provider` and nothing else (RPCLine's:
    /// the front door answers it on its fast path); `nil` when the call failed on the way.
    public func plainTokenReply(provider: String) -> [UInt8]? {
        guard let connection = try? RPCConnection(path: socketPath),
            (try? connection.send(RPCLine.request(.token, parameter: "provider", provider))) != nil
        else { return nil }
        return try? connection.receiveLine()
    }

    /// A reply line decoded with the Codable decoder: the result as `Result`, or the daemon's
    /// error answer thrown with its reason.
    public static func decodeReply<Result: Decodable>(_ reply: [UInt8], as: Result.Type = Result.self) throws(RPCClientError) -> Result {
        try RPCConnection.decodeReply(reply, id: RPCLine.clientID, as: Result.self)
    }
}
