package import AuthGateClient
package import AuthGateRPC
import FoundationEssentials

/// The daemon as the CLI and the tools talk to it, through ``AuthGateClient`` (the one client
/// of the socket): blocking calls, a spinner on the terminal while a slow one runs (not under
/// `--json`), and any failure as a ``ToolFailure`` (one sentence with the daemon's reason, and
/// the exit status of its class).
package struct DaemonConnection: Sendable {
    /// The client every call goes through.
    package let client: AuthGateClient
    /// Whether the caller prints JSON: no spinner, and errors as JSON.
    package let json: Bool

    /// - Parameter socket: The socket asked for; `nil`: where the daemon is usually found.
    package init(socket: String?, json: Bool = false) {
        client = AuthGateClient(socketPath: socket)
        self.json = json
    }

    /// The socket the calls go to.
    package var socketPath: String { client.socketPath }

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
            return try client.callBlocking(method, params, as: Result.self)
        } catch {
            throw ToolFailure(error, json: json)
        }
    }

    /// The providers the caller may use (`providers.list`).
    package func providers() throws(ToolFailure) -> [ProviderInfo] {
        try call(.providersList, EmptyResult(), as: [ProviderInfo].self)
    }

    /// Prints `value` as JSON on stdout, as the daemon's coder writes it.
    package static func printJSON<Value: Encodable>(_ value: Value) throws {
        let data = try RPCCoding.makeEncoder().encode(value)
        print(String(decoding: data, as: UTF8.self))
    }
}
