import AuthGateClient
package import AuthGateRPC
import FoundationEssentials

/// The daemon as the tools talk to it: one blocking call, a spinner on the terminal while a
/// slow one runs (not under `--json`), and any failure as a ``ToolFailure`` (one sentence with
/// the daemon's reason, and the exit status of its class).
package struct DaemonConnection: Sendable {
    /// The socket: the one asked for, else where the daemon is usually found.
    package let socketPath: String
    /// Whether the caller prints JSON: no spinner, and errors as JSON.
    package let json: Bool

    package init(socket: String?, json: Bool) {
        socketPath = socket ?? SocketLocation.forClient()
        self.json = json
    }

    /// Calls `method` with `params`; `progress` is what the spinner says while it waits.
    package func call<Params: Encodable, Result: Decodable>(
        _ method: RPCMethod,
        _ params: Params,
        as: Result.Type = Result.self,
        progress: String? = nil
    ) throws(ToolFailure) -> Result {
        let spinner = progress.flatMap { json ? nil : Spinner(message: $0) }
        defer { spinner?.stop() }
        do {
            return try AuthGateClient(socketPath: socketPath).callBlocking(method, params, as: Result.self)
        } catch {
            throw ToolFailure(error, json: json)
        }
    }

    /// Prints `value` as JSON on stdout, as the daemon's coder writes it.
    package static func printJSON<Value: Encodable>(_ value: Value) throws {
        let data = try RPCCoding.makeEncoder().encode(value)
        print(String(decoding: data, as: UTF8.self))
    }
}
