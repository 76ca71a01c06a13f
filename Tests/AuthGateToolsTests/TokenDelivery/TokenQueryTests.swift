import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate token`'s calls (TokenQuery) in process, against a daemon of one answer per method;
/// the built CLI prints them in CLITests and DPoPProofRequestTests.
@Suite("authgate token's calls (TokenQuery)")
struct TokenQueryTests {
    private static func token(type: String = "Bearer", idToken: String? = nil) -> TokenResult {
        TokenResult(
            accessToken: Secret("tok-1"),
            tokenType: type,
            expiresAt: Date(timeIntervalSince1970: 1_893_456_000),
            scopes: [],
            idToken: idToken.map(Secret.init)
        )
    }

    /// A compact JWS whose payload is `claims` (the signature is not checked here).
    private static func jwt(_ claims: String) -> String {
        let payload = Data(claims.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJSUzI1NiJ9.\(payload).c2ln"
    }

    @Test("--audience or --requested-token-type exchange the token (token.exchange); otherwise the session's own token, with its options")
    func exchangeOrToken() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in DaemonAnswers.result(Self.token(), id: id) }
        let connection = DaemonConnection(socket: daemon.path)
        _ = try TokenQuery(provider: "corp", session: nil, audience: "api", daemon: connection).result()
        _ = try TokenQuery(provider: "corp", session: "work", minValid: 300, scopes: ["read"], daemon: connection).result()
        #expect(daemon.requests.count == 2)
        #expect(daemon.requests[0].contains(#""method":"token.exchange""#) && daemon.requests[0].contains(#""audience":"api""#))
        #expect(daemon.requests[1].contains(#""method":"token""#) && daemon.requests[1].contains(#""min_valid_seconds":300"#))
        #expect(daemon.requests[1].contains(#""session":"work""#) && daemon.requests[1].contains(#""scopes":["read"]"#))
    }

    @Test("--header: a Bearer token has no DPoP line; a DPoP session's needs the request's URL (status 5), and its proof is for the method in capitals")
    func headers() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in DaemonAnswers.result(DPoPProofResult(proof: "proof-1", jkt: "jkt"), id: id) }
        let query = TokenQuery(provider: "corp", session: nil, daemon: DaemonConnection(socket: daemon.path))
        #expect(TokenQuery.authorizationHeader(Self.token()) == "Authorization: Bearer tok-1")
        #expect(try query.dpopHeader(Self.token(), method: "GET", url: nil) == nil)
        let missing = #expect(throws: ToolFailure.self) { try query.dpopHeader(Self.token(type: "DPoP"), method: "GET", url: nil) }
        #expect(missing?.status == ToolFailure.inputRefused && missing?.description.contains("add --url") == true)
        #expect(daemon.requests.isEmpty)
        #expect(try query.dpopHeader(Self.token(type: "DPoP"), method: "post", url: "https://api.example.com/x") == "DPoP: proof-1")
        #expect(daemon.requestText.contains(#""htm":"POST""#) && daemon.requestText.contains(#""method":"dpop.proof""#))
    }

    @Test("the answer: the bare token unless more is asked; --json hands the result back; --header's Authorization line precedes a DPoP failure")
    func answerByFlags() throws {
        let scratch = try ScratchDirectory()
        let bearer = try StandInDaemon(in: scratch.path) { _, id in DaemonAnswers.result(Self.token(), id: id) }
        let query = TokenQuery(provider: "corp", session: nil, daemon: DaemonConnection(socket: bearer.path))
        var lines: [String] = []
        #expect(try query.answer(idToken: false, header: false, json: false, method: "GET", url: nil) { lines.append($0) } == nil)
        #expect(lines == ["tok-1"])
        let result = try query.answer(idToken: false, header: false, json: true, method: "GET", url: nil) { lines.append($0) }
        #expect(result?.accessToken.exposedValue == "tok-1" && lines == ["tok-1"])
        lines = []
        #expect(try query.answer(idToken: false, header: true, json: false, method: "GET", url: nil) { lines.append($0) } == nil)
        #expect(lines == ["Authorization: Bearer tok-1"])
        lines = []
        var exchanged = query
        exchanged.audience = "api"
        #expect(try exchanged.answer(idToken: false, header: false, json: false, method: "GET", url: nil) { lines.append($0) } == nil)
        #expect(lines == ["tok-1"] && bearer.requestText.contains(#""method":"token.exchange""#))
        let dpopScratch = try ScratchDirectory()
        let dpop = try StandInDaemon(in: dpopScratch.path) { _, id in DaemonAnswers.result(Self.token(type: "DPoP"), id: id) }
        lines = []
        let missing = #expect(throws: ToolFailure.self) {
            try TokenQuery(provider: "corp", session: nil, daemon: DaemonConnection(socket: dpop.path))
                .answer(idToken: false, header: true, json: false, method: "GET", url: nil) { lines.append($0) }
        }
        #expect(missing?.status == ToolFailure.inputRefused)
        #expect(lines == ["Authorization: DPoP tok-1"])
    }

    @Test("--id-token goes without --header, --audience, --requested-token-type, --resource and --json")
    func idTokenFlags() {
        let sentence = "--id-token prints the session's ID token: it goes without --header, --audience, --requested-token-type, --resource and --json."
        let plain = TokenQuery(provider: "corp", session: nil, minValid: 60, forceRefresh: true, scopes: ["openid"], daemon: DaemonConnection(socket: nil))
        #expect(plain.problem(idToken: true, header: false, json: false) == nil)
        #expect(plain.problem(idToken: false, header: true, json: true) == nil)
        #expect(plain.problem(idToken: true, header: true, json: false) == sentence)
        #expect(plain.problem(idToken: true, header: false, json: true) == sentence)
        for change in [\TokenQuery.audience, \.requestedTokenType, \.resource] {
            var query = plain
            query[keyPath: change] = "x"
            #expect(query.problem(idToken: true, header: false, json: false) == sentence)
        }
    }

    @Test("--id-token: the session's ID token while it stays valid; a session without one is told to sign in with openid (status 3)")
    func idToken() throws {
        let scratch = try ScratchDirectory()
        let id = Self.jwt(#"{"sub":"alice","exp":4102444800}"#)
        let withID = try StandInDaemon(in: scratch.path) { _, requestID in DaemonAnswers.result(Self.token(idToken: id), id: requestID) }
        #expect(try TokenQuery(provider: "corp", session: nil, daemon: DaemonConnection(socket: withID.path)).idToken() == id)

        try FileManager.default.removeItem(atPath: withID.path)
        let without = try StandInDaemon(in: scratch.path) { _, requestID in DaemonAnswers.result(Self.token(), id: requestID) }
        let failure = #expect(throws: ToolFailure.self) {
            try TokenQuery(provider: "corp", session: nil, daemon: DaemonConnection(socket: without.path)).idToken()
        }
        #expect(failure?.status == ToolFailure.signInRequired && failure?.description.contains("leave out --id-token for the access token") == true)
    }
}
