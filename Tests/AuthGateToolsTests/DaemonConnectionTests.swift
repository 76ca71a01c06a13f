import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A daemon of one connection on a Unix socket: it reads one request line and answers `reply`
/// with the request's id.
private final class OneAnswerDaemon: Sendable {
    let path: String
    private let listener: Int32

    init(in directory: String, reply: @escaping @Sendable (_ id: String) -> String) throws {
        path = directory + "/s.sock"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        let socketFD = listener
        Thread {
            let connection = accept(socketFD, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(connection, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
            let request = String(decoding: line, as: UTF8.self)
            let id = request.firstMatch(of: /"id":([0-9]+)/).map { String($0.1) } ?? "null"
            let answer = Array((reply(id) + "\n").utf8)
            _ = answer.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
        }.start()
    }

    deinit { close(listener) }
}

@Suite("The daemon as the CLI calls it")
struct DaemonConnectionTests {
    @Test("an answer is decoded; an error answer is one sentence with its reason and the status of its class; no daemon is status 2 naming the socket")
    func calls() throws {
        let scratch = try ScratchDirectory()
        let answering = try OneAnswerDaemon(in: scratch.path) { id in
            #"{"jsonrpc":"2.0","id":\#(id),"result":{"removed":true}}"#
        }
        let removed = try DaemonConnection(socket: answering.path, json: false).call(.logout, LogoutParams(provider: "corp"), as: LogoutResult.self)
        #expect(removed.removed)

        try FileManager.default.removeItem(atPath: answering.path)
        // The error object as the daemon's coder writes it.
        let error = try RPCCoding.makeEncoder().encode(RPCErrorObject(AuthGateError(.loginRequired, "You are not signed in to corp.")))
        let errorObject = String(decoding: error, as: UTF8.self)
        let refusing = try OneAnswerDaemon(in: scratch.path) { id in
            #"{"jsonrpc":"2.0","id":\#(id),"error":\#(errorObject)}"#
        }
        let refused = #expect(throws: ToolFailure.self) {
            try DaemonConnection(socket: refusing.path, json: false).call(.logout, LogoutParams(provider: "corp"), as: LogoutResult.self)
        }
        #expect(refused?.status == ToolFailure.signInRequired, "\(refused.map { "\($0)" } ?? "")")
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
