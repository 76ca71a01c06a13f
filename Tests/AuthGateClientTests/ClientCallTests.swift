import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `token` answer with `token` as its access token.
func tokenAnswer(_ id: String, _ token: String, type: String = "Bearer") -> String {
    #"{"id":\#(id),"jsonrpc":"2.0","result":{"access_token":"\#(token)","expires_at":"2027-01-15T08:00:00Z","scopes":["openid"],"token_type":"\#(type)"}}"#
}

/// An error answer as the daemon's coder writes it.
func errorAnswer(_ id: String, _ error: AuthGateError) -> String {
    String(decoding: RPCLine.error(error, id: Int64(id).map(RPCID.number)).dropLast(), as: UTF8.self)
}

/// The client against a daemon stand-in on a Unix socket, in process: what it sends, what it
/// makes of each kind of answer.
@Suite("The client's calls against a stand-in daemon")
struct ClientCallTests {
    @Test("a call sends one request line with its params and decodes the answer")
    func call() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { method, id in
            method == "token" ? tokenAnswer(id, "at-1") : errorAnswer(id, AuthGateError(.methodNotFound, "no"))
        }
        let token = try await AuthGateClient(socketPath: daemon.path).token(provider: "corp", session: "work", minimumValidity: 120)
        #expect(token.accessToken.exposedValue == "at-1" && token.tokenType == "Bearer" && token.scopes == ["openid"])
        #expect(token.expiresAt == (try Date("2027-01-15T08:00:00Z", strategy: .iso8601)))
        let request = try #require(daemon.requests.first)
        #expect(daemon.requests.count == 1)
        let object = try JSONSerialization.jsonObject(with: Data(request.utf8)) as? [String: Any]
        let params = object?["params"] as? [String: Any]
        #expect(object?["jsonrpc"] as? String == "2.0" && object?["method"] as? String == "token")
        #expect(params?["provider"] as? String == "corp" && params?["session"] as? String == "work" && params?["min_valid_seconds"] as? Int == 120)
    }

    @Test("an error answer is the daemon's reason, sentence and wait; the daemon was reached")
    func errorAnswerKeepsItsReason() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            errorAnswer(id, AuthGateError(.serviceUnavailable, "corp is unavailable: it answered HTTP 503.", retryAfterSeconds: 30))
        }
        let error = await #expect(throws: AuthGateClientError.self) {
            try await AuthGateClient(socketPath: daemon.path).token(provider: "corp")
        }
        #expect(error?.reason == .serviceUnavailable && error?.retryAfterSeconds == 30 && error?.isDaemonUnreachable == false)
        #expect(error?.message == "corp is unavailable: it answered HTTP 503.")
        #expect(error?.description == "corp is unavailable: it answered HTTP 503. [service_unavailable]")
    }

    @Test("a daemon that closes the connection without answering is a protocol failure, not an unreachable daemon")
    func closedConnection() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, _ in nil }
        let error = await #expect(throws: AuthGateClientError.self) {
            try await AuthGateClient(socketPath: daemon.path).status()
        }
        #expect(error?.reason == nil && error?.isDaemonUnreachable == false)
        #expect(error?.message.contains("closed the connection") == true, "\(error?.message ?? "")")
    }

    @Test("an answer that is not JSON-RPC is a protocol failure naming what was wrong")
    func nonsense() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, _ in "HTTP/1.1 400 Bad Request" }
        let error = await #expect(throws: AuthGateClientError.self) {
            try await AuthGateClient(socketPath: daemon.path).providers()
        }
        #expect(error?.reason == nil && error?.isDaemonUnreachable == false)
        #expect(error?.message.contains("cannot decode the response") == true, "\(error?.message ?? "")")
    }

    @Test("no socket, a socket nothing listens on, and a path too long for a socket: unreachable, naming the path")
    func unreachable() async throws {
        let scratch = try ScratchDirectory()
        let missing = scratch.path + "/none.sock"
        let absent = await #expect(throws: AuthGateClientError.self) { try await AuthGateClient(socketPath: missing).token(provider: "corp") }
        #expect(absent?.isDaemonUnreachable == true && absent?.message.contains(missing) == true && absent?.message.contains("no socket there") == true)

        // A socket file left behind (a daemon that crashed): bound, never listened on.
        let leftover = scratch.path + "/left.sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(leftover.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        close(descriptor)
        try #require(bound == 0)
        let refused = await #expect(throws: AuthGateClientError.self) { try await AuthGateClient(socketPath: leftover).token(provider: "corp") }
        #expect(refused?.isDaemonUnreachable == true && refused?.message.contains("connection refused") == true, "\(refused?.message ?? "")")

        let long = "/tmp/" + String(repeating: "d", count: 120) + "/s.sock"
        let tooLong = await #expect(throws: AuthGateClientError.self) { try await AuthGateClient(socketPath: long).token(provider: "corp") }
        #expect(tooLong?.isDaemonUnreachable == true && tooLong?.message.contains("longer than 107 bytes") == true)
    }

    @Test("calls on one connection get increasing ids, and each answer is matched to its call")
    func callsOnOneConnection() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in #"{"id":\#(id),"jsonrpc":"2.0","result":{}}"# }
        let connection = try RPCConnection(path: daemon.path)
        for _ in 0..<3 { _ = try connection.call(.status, StatusParams(), as: EmptyResult.self) }
        #expect(daemon.requests.map { $0.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) } } == ["1", "2", "3"])
    }
}
