import AuthGateOAuth
import AuthGateTestSupport
import Testing

@testable import AuthGateDaemon

/// The browser's redirect query, decoded without Foundation's `removingPercentEncoding`.
@Suite("Redirect query decoding")
struct RedirectQueryTests {
    @Test(
        "form-encoded names and values: + is a space, %XX a byte, UTF-8 required",
        arguments: [
            ("abc", "abc"), ("a+b", "a b"), ("%41%2b%2F", "A+/"), ("%C3%A9t%C3%A9", "été"), ("", ""), ("%7e~", "~~"),
        ]
    )
    func decodes(_ encoded: String, _ decoded: String) {
        #expect(FormEncoding.unescape(encoded) == decoded)
    }

    @Test("a broken escape or bytes that are not UTF-8 are refused", arguments: ["%", "%4", "%G1", "%ZZ", "a%", "%FF", "%C3", "%C3%28"])
    func refuses(_ encoded: String) {
        #expect(FormEncoding.unescape(encoded) == nil)
    }

    @Test("a query with a repeated name, or one that does not decode, is refused as a whole")
    func query() {
        #expect(LoopbackRedirectListener.parseQuery("code=a%2Bb&state=x+y") == ["code": "a+b", "state": "x y"])
        #expect(LoopbackRedirectListener.parseQuery("code=1&code=2") == nil)
        #expect(LoopbackRedirectListener.parseQuery("code=%ZZ") == nil)
        #expect(LoopbackRedirectListener.parseQuery("flag") == ["flag": ""])
    }
}
