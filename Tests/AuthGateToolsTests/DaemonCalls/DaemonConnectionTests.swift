import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The daemon as the CLI calls it")
struct DaemonConnectionTests {
    @Test("an answer is decoded; an error answer is one sentence with its reason and the status of its class; no daemon is status 2 naming the socket")
    func calls() throws {
        let scratch = try ScratchDirectory()
        let answering = try StandInDaemon(in: scratch.path) { _, id in
            #"{"jsonrpc":"2.0","id":\#(id),"result":{"removed":true}}"#
        }
        let removed = try DaemonConnection(socket: answering.path, json: false).call(.logout, LogoutParams(provider: "corp"), as: LogoutResult.self)
        #expect(removed.removed)

        try FileManager.default.removeItem(atPath: answering.path)
        // The error object as the daemon's coder writes it.
        let error = try RPCCoding.makeEncoder().encode(RPCErrorObject(AuthGateError(.loginRequired, "You are not signed in to corp.")))
        let errorObject = String(decoding: error, as: UTF8.self)
        let refusing = try StandInDaemon(in: scratch.path) { _, id in
            #"{"jsonrpc":"2.0","id":\#(id),"error":\#(errorObject)}"#
        }
        let refused = #expect(throws: ToolFailure.self) {
            try DaemonConnection(socket: refusing.path, json: false).call(.logout, LogoutParams(provider: "corp"), as: LogoutResult.self)
        }
        #expect(refused?.status == ToolFailure.signInRequired && refused?.reason == .loginRequired, "\(refused.map { "\($0)" } ?? "")")
        #expect(
            refused?.description.contains("You are not signed in to corp.") == true && refused?.description.contains("[login_required]") == true,
            "\(refused.map { "\($0)" } ?? "")"
        )

        let missing = scratch.path + "/none.sock"
        let unreachable = #expect(throws: ToolFailure.self) {
            try DaemonConnection(socket: missing, json: false).call(.logout, LogoutParams(provider: "corp"), as: LogoutResult.self)
        }
        #expect(unreachable?.status == ToolFailure.daemonUnreachable && unreachable?.description.contains(missing) == true)
    }
}
