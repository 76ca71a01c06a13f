import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The session's ID token")
struct SessionIDTokenTests {
    @Test("the claims of a compact JWS's payload (base64url, no padding); not a JWS: none")
    func claims() throws {
        let payload = Data(#"{"sub":"alice","exp":1800000000,"aud":["k8s"]}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let claims = try #require(SessionIDToken.claims(of: "eyJhbGciOiJSUzI1NiJ9.\(payload).c2ln"))
        #expect(claims["sub"] == .string("alice"))
        #expect(claims["exp"] == .number(1_800_000_000))
        #expect(SessionIDToken.claims(of: "not-a-jwt") == nil)
        #expect(SessionIDToken.claims(of: "a.%%%.c") == nil)
    }
}
