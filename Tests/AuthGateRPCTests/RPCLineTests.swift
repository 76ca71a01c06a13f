import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// The one wire codec (``RPCLine``): what it writes, its fast readers read back, and the JSON
/// decoder reads the same.
@Suite("The wire codec: RPCLine")
struct RPCLineTests {
    @Test("a request line is one plain line the front door's scanner reads, and the decoder reads the same call")
    func requests() throws {
        let line = RPCLine.request(.token, params: ["provider": .string("corp"), "session": .string("work")])
        #expect(line.last == 0x0A && line.dropLast().allSatisfy { $0 != 0x0A })
        let plain = try #require(Array(line.dropLast()).withUnsafeBytes { PlainTokenRequest($0) })
        #expect(plain.target == .session(provider: "corp", session: "work") && plain.id == Array("1".utf8))
        let decoded = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
        #expect(decoded?["jsonrpc"] as? String == "2.0" && decoded?["method"] as? String == "token" && decoded?["id"] as? Int == 1)

        let encoded = try RPCCoding.makeEncoder().encode(TokenParams(provider: "corp"))
        let watch = RPCLine.request(.tokenWatch, encodedParams: encoded)
        let read = try JSONSerialization.jsonObject(with: Data(watch)) as? [String: Any]
        #expect(read?["method"] as? String == "token.watch" && (read?["params"] as? [String: Any])?["provider"] as? String == "corp")
    }

    @Test("a success line carries the id and result as given; the CLI's readers take the token and the result from it, and decline anything else")
    func answers() throws {
        let result = Array(#"{"access_token":"at-1.x_y","expires_at":"2026-11-27T20:00:00Z","scopes":[],"token_type":"Bearer"}"#.utf8)
        var line: [UInt8] = []
        RPCLine.success(id: Array("1".utf8), result: result, into: &line)
        #expect(line.count == 1 + result.count + RPCLine.successFramingLength)
        #expect(RPCLine.bareAccessToken(in: line) == "at-1.x_y")
        #expect(RPCLine.result(in: line)?.objectValue?["token_type"]?.stringValue == "Bearer")
        let decoded = try RPCConnection.decodeReply(line, id: RPCLine.clientID, as: TokenResult.self)
        #expect(decoded.accessToken.exposedValue == "at-1.x_y")

        var otherID: [UInt8] = []
        RPCLine.success(id: Array("2".utf8), result: result, into: &otherID)
        #expect(RPCLine.bareAccessToken(in: otherID) == nil, "another call's answer")
        let escaped = Array(#"{"id":1,"jsonrpc":"2.0","result":{"access_token":"a\u0062"}}"#.utf8)
        #expect(RPCLine.bareAccessToken(in: escaped) == "ab", "read as the decoder reads it")
        // A line that starts like an answer but is not JSON (found by the watch-line fuzz target).
        let broken = Array(#"{"id":1,"jsonrpc":"2.0","result":{"access_token":"mock{"jsonrpc":"2.0"}"#.utf8)
        #expect(RPCLine.bareAccessToken(in: broken) == nil && RPCLine.result(in: broken) == nil)
        let error = Array(#"{"error":{"code":-32008,"message":"m"},"id":1,"jsonrpc":"2.0"}"#.utf8)
        #expect(RPCLine.bareAccessToken(in: error) == nil && RPCLine.result(in: error) == nil)
    }

    @Test("authgate token's request with one parameter, written without a dictionary, is the same line as the dictionary's, escapes included")
    func oneParameterRequest() {
        for provider in ["corp", "a\"b\\c\n\u{1}\u{7f}", "é😀", ""] {
            #expect(RPCLine.request(.token, parameter: "provider", provider) == RPCLine.request(.token, params: ["provider": .string(provider)]))
        }
    }

    @Test(
        "the token is read member by member as the whole-line reader reads it: members in any order and spacing, nested values skipped; a repeated member (also when only its escapes differ), invalid UTF-8, a trailing byte, an error member or deep nesting are declined"
    )
    func bareTokenAsTheReaderReadsIt() {
        func token(_ text: String) -> String? { RPCLine.bareAccessToken(in: Array(text.utf8)) }
        #expect(token(#" { "result" : {"scope":["a",{"b":[1,2.5e3,null,true]}], "access_token" : "t" } , "jsonrpc":"2.0", "id" : 1 }  "#) == "t")
        #expect(token(#"{"id":1,"result":{"access_token":"t"},"extra":{"x":{"y":[]}}}"#) == "t")
        #expect(token(#"{"id":1,"id":1,"result":{"access_token":"t"}}"#) == nil)
        #expect(token(#"{"id":1,"result":{"access_token":"t","access_token":"u"}}"#) == nil)
        #expect(token(#"{"id":1,"result":{"access_token":"t","\u0061ccess_token":"u"}}"#) == nil)
        #expect(token(#"{"id":1,"result":{"access_token":"t","x":1,"x":2}}"#) == nil)
        #expect(token(#"{"id":1,"result":{"access_token":"t"}}x"#) == nil)
        #expect(token(#"{"id":1,"result":{"access_token":"t"},"error":null}"#) == nil)
        #expect(token(#"{"id":1,"result":{"access_token":7}}"#) == nil)
        #expect(token(#"{"id":1,"result":"t"}"#) == nil)
        #expect(token(#"{"id":1.5,"result":{"access_token":"t"}}"#) == nil)
        #expect(token(#"{"result":{"access_token":"t"}}"#) == nil)
        #expect(token(#"{"id":1000000000000000000000000000000000000001,"result":{"access_token":"t"}}"#) == nil, "an id the reader declines")
        #expect(RPCLine.bareAccessToken(in: Array(#"{"id":1,"result":{"access_token":""#.utf8) + [0xC3, 0x28] + Array(#""}}"#.utf8)) == nil)
        let deep = String(repeating: "[", count: 70) + String(repeating: "]", count: 70)
        #expect(token(#"{"id":1,"result":{"access_token":"t","d":"# + deep + "}}") == nil)
        // Each of these, the whole-line reader reads the same way (or declines too).
        for text in [#"{"id":1,"result":{"access_token":"t","x":[1,{"a":2}]}}"#, #"{"id":1,"result":{"access_token":"t","x":1,"x":2}}"#] {
            let whole = JSONValue.readPlain(Array(text.utf8))?.objectValue?["result"]?.objectValue?["access_token"]?.stringValue
            #expect(token(text) == whole, "\(text)")
        }
    }
}
