import AuthGateCore
import Foundation
import Testing

/// The CLI's plain JSON reader (JSONValue.readPlain): it reads what the JSON decoder reads as
/// the same value, or leaves the document to it (`nil`), never a different value. The same
/// property is fuzzed against the decoder (`scripts/fuzz rpc-line`).
@Suite("JSON reading")
struct JSONReadingTests {
    private func plain(_ text: String) -> JSONValue? { JSONValue.readPlain(Array(text.utf8)) }
    private func decoded(_ text: String) -> JSONValue? { try? JSONValue.parse(Data(text.utf8)) }

    @Test(
        "reads a document as the decoder does",
        arguments: [
            // The daemon's answers, as the helpers and kubectl read them.
            #"{"id":1,"jsonrpc":"2.0","result":{"provider":"mock","token":{"access_token":"mock_at_x-y_z","expires_at":"2026-11-27T05:28:21Z","scopes":[],"token_type":"Bearer"},"username":"oauth2"}}"#,
            #"{"error":{"code":-32001,"data":{"reason":"login_required"},"message":"Sign in first: authgate login corp"},"id":1,"jsonrpc":"2.0"}"#,
            // Every kind of value, escapes, whitespace and numbers.
            #" { "a" : [ 1 , -2.5 , 3e2 , 0.125E-2 , -0 , 12345678901234567890 ] , "b" : { } , "c" : [ ] , "d" : null , "e" : true , "f" : false } "#,
            #"{"s":"quote \" backslash \\ slash \/ \b\f\n\r\t \u0000 \u00e9 \u2713 \ud83d\udd11"}"#,
            #"["ünïcødé ✓ 🔑", "", "\u0041"]"#,
            "\t\r\n\"a top-level string\"\n",
            "42",
            // Numbers at the edges of Double's normal range, long mantissas, zeros.
            "[2.2250738585072014e-308, 1.7976931348623157e308, 123456789012345678901234567890, -0.0, 0e0, 0.000e-400, 1E+2]",
            "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]",
        ]
    )
    func agrees(_ text: String) throws {
        let value = try #require(plain(text))
        #expect(value == decoded(text))
    }

    @Test(
        "leaves to the decoder what is not JSON, or what it does not read",
        arguments: [
            "", " ", "{", "}", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, #"{a:1}"#, "[1 2]", "01", "1.", ".5", "+1", "1e", "-", "1e400",
            // Beyond Double: the decoder refuses 1e-400 (not representable); subnormals are left to it too.
            "1e-400", "2e-324", "4.9e-324", "1e-310",
            "tru", "nul", "[true false]", #""unterminated"#, "\"raw\ncontrol\"", #""\x""#, #""\u12""#, #""\ud800""#, #""\udc00x""#,
            #""\ud800\u0041""#, "1 2", "[1] x",
            // Which of two equal keys wins is the decoder's business.
            #"{"a":1,"a":2}"#,
            // Nesting deeper than 64.
            String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
        ]
    )
    func leavesToTheDecoder(_ text: String) {
        #expect(plain(text) == nil)
    }

    @Test("invalid UTF-8 in a string is left to the decoder")
    func invalidUTF8() {
        #expect(JSONValue.readPlain([0x22, 0xFF, 0x22]) == nil)
        #expect(JSONValue.readPlain([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22]) == nil)
    }

    @Test("what the CLI's writer writes reads back as itself")
    func roundTrip() throws {
        let value: JSONValue = .object([
            "id": .number(1), "jsonrpc": .string("2.0"), "result": .object(["nested": .array([.null, .bool(false), .number(0.5), .string("a\"b\\c\u{1}")])]),
        ])
        #expect(JSONValue.readPlain(value.jsonBytes) == value)
    }
}
