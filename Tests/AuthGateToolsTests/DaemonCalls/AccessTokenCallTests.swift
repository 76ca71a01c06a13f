import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate token PROVIDER`'s call (DaemonConnection.accessToken) in process, against a daemon of one
/// answer: the plain request line for plain params, the decoder for the rest, a refusal as any
/// call's.
@Suite("authgate token's call (DaemonConnection.accessToken)")
struct AccessTokenCallTests {
    private static func tokenAnswer(_ method: String, _ id: String) -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"result":{"access_token":"tok-7","token_type":"Bearer","expires_at":"2030-01-01T00:00:00Z","scopes":[]}}"#
    }

    @Test("plain params: the plain request line, read without the JSON coders; a session or a minimum goes the ordinary way, with the same token")
    func calls() throws {
        let scratch = try ScratchDirectory()
        let plain = try StandInDaemon(in: scratch.path, reply: Self.tokenAnswer)
        #expect(try DaemonConnection(socket: plain.path).accessToken(TokenParams(provider: "corp")) == "tok-7")
        #expect(plain.requestText == String(decoding: RPCLine.request(.token, params: ["provider": .string("corp")]).dropLast(), as: UTF8.self))

        try FileManager.default.removeItem(atPath: plain.path)
        let ordinary = try StandInDaemon(in: scratch.path, reply: Self.tokenAnswer)
        #expect(try DaemonConnection(socket: ordinary.path).accessToken(TokenParams(provider: "corp", session: "work", minValidSeconds: 300)) == "tok-7")
        #expect(ordinary.requestText.contains(#""session":"work""#) && ordinary.requestText.contains(#""min_valid_seconds":300"#))
    }

    @Test("a refusal is the daemon's sentence with its reason and the status of its class; no daemon is status 2")
    func failures() throws {
        let scratch = try ScratchDirectory()
        let error = String(decoding: try RPCCoding.makeEncoder().encode(RPCErrorObject(AuthGateError(.loginRequired, "Sign in to corp first."))), as: UTF8.self)
        let refusing = try StandInDaemon(in: scratch.path) { _, id in #"{"jsonrpc":"2.0","id":\#(id),"error":\#(error)}"# }
        let refused = #expect(throws: ToolFailure.self) { try DaemonConnection(socket: refusing.path).accessToken(TokenParams(provider: "corp")) }
        #expect(refused?.status == ToolFailure.signInRequired && refused?.description.contains("Sign in to corp first. [login_required]") == true)

        let missing = #expect(throws: ToolFailure.self) { try DaemonConnection(socket: scratch.path + "/none.sock").accessToken(TokenParams(provider: "corp")) }
        #expect(missing?.status == ToolFailure.daemonUnreachable)
    }
}
