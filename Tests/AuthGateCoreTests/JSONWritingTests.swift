import AuthGateCore
import Foundation
import Testing

/// The CLI's JSON writer (JSONValue.jsonBytes): what it writes is what the parser reads back,
/// byte for byte the same for the same value.
@Suite("JSON writing")
struct JSONWritingTests {
    private func text(_ value: JSONValue) -> String { String(decoding: value.jsonBytes, as: UTF8.self) }

    @Test("compact, members sorted, integers without a fraction")
    func compact() {
        let value: JSONValue = .object([
            "provider": .string("corp"), "min_valid_seconds": .number(60), "force_refresh": .bool(true),
            "scopes": .array([.string("a"), .string("b")]), "resource": .null, "ratio": .number(0.5),
        ])
        #expect(text(value) == #"{"force_refresh":true,"min_valid_seconds":60,"provider":"corp","ratio":0.5,"resource":null,"scopes":["a","b"]}"#)
        #expect(text(.number(-3)) == "-3" && text(.number(.infinity)) == "null")
    }

    @Test(
        "strings are escaped as JSON requires and read back unchanged",
        arguments: [
            "plain", "quote \" backslash \\ slash /", "line\nfeed\r\ttab", "\u{0}\u{1}\u{8}\u{c}\u{1f}", "ünïcødé ✓ 🔑", "",
        ]
    )
    func strings(_ string: String) throws {
        let written = JSONValue.object(["k": .string(string)]).jsonBytes
        #expect(!written.contains { $0 < 0x20 }, "no raw control character")
        #expect(try JSONValue.parse(Data(written)) == .object(["k": .string(string)]))
        // The same bytes as the daemon's encoder (sorted keys, slashes unescaped) writes.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(JSONValue.quoted(string) == String(decoding: try encoder.encode(string), as: UTF8.self))
    }

    @Test("any value reads back as itself")
    func roundTrip() throws {
        let value: JSONValue = .object([
            "id": .number(1), "jsonrpc": .string("2.0"), "method": .string("credential.get"),
            "params": .object(["host": .string("git.example.com:8443"), "path": .string("org/repo.git"), "nested": .array([.null, .bool(false)])]),
        ])
        #expect(try JSONValue.parse(Data(value.jsonBytes)) == value)
        #expect(value.jsonBytes == value.jsonBytes, "the same bytes every time")
    }
}
