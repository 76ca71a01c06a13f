import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import NIOCore
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The lines the front door answers itself (a plain `token` or `credential.get`) and those it
/// hands on to the dispatcher.
extension CachedTokenTests {
    @Test(
        "plain token lines are read exactly as the JSON decoder reads them",
        arguments: [
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}"#,
            #"{"id":42,"jsonrpc":"2.0","method":"token","params":{"provider":"corp","session":"work"}}"#,
            #" { "params" : { "min_valid_seconds" : 300 , "provider" : "corp" } , "method" : "token" , "jsonrpc" : "2.0" , "id" : "a-1" } "#,
            #"{"jsonrpc":"2.0","id":-7,"method":"token","params":{"provider":"mock","force_refresh":false,"min_valid_seconds":0}}"#,
            "{\"jsonrpc\":\"2.0\",\t\"id\":123456789012345678,\r\"method\":\"token\",\"params\":{\"provider\":\"mock\",\"min_valid_seconds\":86400}}",
            #"{"jsonrpc":"2.0","id":"x/y z","method":"token","params":{"provider":"m","session":"Default.2"}}"#,
        ]
    )
    func acceptedLines(_ line: String) throws {
        let request = try #require(scan(line), "the scanner should accept \(line)")
        let decoded = try RPCCoding.makeDecoder().decode(DecodedRequest.self, from: Data(line.utf8))
        let params = try #require(try decoded.params.get() as? TokenParams)
        #expect(decoded.envelope.method == "token" && decoded.envelope.jsonrpc == "2.0")
        #expect(request.target == .session(provider: params.provider, session: params.session))
        #expect(request.minimumValidity == params.minValidSeconds)
        #expect(params.forceRefresh != true && params.scopes == nil && params.resource == nil)
        // The id is echoed as sent; it must mean what the dispatcher's re-encoded id means.
        let echoed = try RPCCoding.makeDecoder().decode(RPCID.self, from: Data(request.id))
        #expect(echoed == decoded.envelope.id)
    }

    @Test(
        "anything else goes to the full decoder",
        arguments: [
            "",
            "[]",
            #"{"jsonrpc":"2.0","id":1,"method":"status","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"1.0","id":1,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","method":"token","params":{"provider":"mock"}}"#,  // a notification
            #"{"jsonrpc":"2.0","id":null,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token"}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"\u006dock"}}"#,  // an escape
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"möck"}}"#,  // not ASCII
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","scopes":[]}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","force_refresh":true}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","min_valid_seconds":86401}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","min_valid_seconds":1.5}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","min_valid_seconds":"5"}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","provider":"corp"}}"#,
            #"{"jsonrpc":"2.0","id":1,"id":2,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":1.0,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":1e3,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":01,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":-0,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":1234567890123456789,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"},"extra":1}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}} x"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock",}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock","force_refresh":falsey}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"token","params":["mock"]}"#,
        ]
    )
    func refusedLines(_ line: String) {
        #expect(scan(line) == nil)
    }

    @Test(
        "plain credential.get lines are read exactly as the JSON decoder reads them",
        arguments: [
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"git.example.com","min_valid_seconds":60,"tool":"git"}}"#,
            #"{"params":{"tool":"docker","host":"Registry.example.com:5000"},"method":"credential.get","id":"d","jsonrpc":"2.0"}"#,
            #" { "jsonrpc" : "2.0" , "id" : 3 , "method" : "credential.get" , "params" : { "host" : "[::1]:443" , "tool" : "git" , "min_valid_seconds" : 0 } } "#,
        ]
    )
    func acceptedCredentialLines(_ line: String) throws {
        let request = try #require(scan(line), "the scanner should accept \(line)")
        let decoded = try RPCCoding.makeDecoder().decode(DecodedRequest.self, from: Data(line.utf8))
        let params = try #require(try decoded.params.get() as? CredentialParams)
        #expect(decoded.envelope.method == "credential.get")
        #expect(request.target == .credential(host: params.host, tool: params.tool))
        #expect(request.minimumValidity == params.minValidSeconds)
        #expect(try RPCCoding.makeDecoder().decode(RPCID.self, from: Data(request.id)) == decoded.envelope.id)
    }

    @Test(
        "a credential.get line with any other member, or a token line with credential.get's, goes to the full decoder",
        arguments: [
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h.example.com","path":"org/repo","tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h.example.com","tool":"git","username":"me"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h.example.com","session":"work","tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"force_refresh":false,"host":"h.example.com","tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h.example.com","provider":"mock","tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h.example.com"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h.example.com","tool":"git","tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"provider":"mock"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"host":"h.example.com","tool":"git"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"provider":"mock","tool":"git"}}"#,
        ]
    )
    func refusedCredentialLines(_ line: String) {
        #expect(scan(line) == nil)
    }

    // MARK: Which provider answers credential.get

    func claim(
        _ provider: String,
        _ hosts: [String],
        tools: [String] = ["git", "docker"],
        paths: [String] = [],
        authType: ProviderConfiguration.CredentialHelper.AuthType = .basic,
        open: Bool = true
    ) -> CredentialRoutes.Claim {
        CredentialRoutes.Claim(
            provider: provider,
            helper: .init(hosts: hosts, username: "u-\(provider)", tools: tools, paths: paths, authType: authType),
            open: open
        )
    }

    func route(_ routes: [CredentialRoutes.Key: CredentialRoutes.Route], _ host: String, _ tool: String = "git") -> String? {
        CredentialRoutes.key(host: host, tool: tool).flatMap { routes[$0]?.provider }
    }
}
