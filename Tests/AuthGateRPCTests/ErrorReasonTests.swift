import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// The reasons are the contract with every client: each has one code, and docs/RPC.md and
/// docs/rpc.schema.json list every one.
@Suite("Error reasons")
struct ErrorReasonTests {
    @Test("one JSON-RPC code per reason and back; docs/RPC.md's table and the schema list every reason")
    func table() throws {
        let codes = ErrorReason.allCases.map(\.rpcCode)
        #expect(Set(codes).count == codes.count, "two reasons share a code")
        for reason in ErrorReason.allCases {
            #expect(ErrorReason(rpcCode: reason.rpcCode) == reason)
            #expect(reason.rpcCode <= -32_000 || [-32_700, -32_600, -32_601, -32_602, -32_603].contains(reason.rpcCode))
        }
        let docs = Repository.root.appendingPathComponent("docs")
        let table = try String(contentsOf: docs.appendingPathComponent("RPC.md"), encoding: .utf8)
        let schema = try String(contentsOf: docs.appendingPathComponent("rpc.schema.json"), encoding: .utf8)
        for reason in ErrorReason.allCases {
            #expect(table.contains("| `\(reason.rawValue)` | \(reason.rpcCode) |"), "docs/RPC.md lists \(reason.rawValue)")
            #expect(schema.contains("\"\(reason.rawValue)\""), "docs/rpc.schema.json lists \(reason.rawValue)")
        }
    }
}
