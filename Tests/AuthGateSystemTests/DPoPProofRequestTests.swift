import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Crypto
import Foundation
import Logging
import Testing

@testable import AuthGateOAuth

#if canImport(Glibc)
import Glibc
#endif

/// `dpop.proof`'s parameters: the nonce's characters, the normalised `htu`, checked before the session.
@Suite("DPoP proofs: nonce characters, htu, parameters checked first", .serialized)
struct DPoPProofRequestTests {
    // MARK: DPoP proofs' parameters

    @Test("a nonce with a space is refused (RFC 9449 §8.1 NQCHAR is %x21-7E but quote and backslash)")
    func nonceCharacters() {
        #expect(!DPoPKey.isValidNonce("a b") && !DPoPKey.isValidNonce(" ") && !DPoPKey.isValidNonce("a\"b") && !DPoPKey.isValidNonce("a\\b"))
        #expect(DPoPKey.isValidNonce("eyJ7S_zG.eyJH0-Z.HX4w-7v") && DPoPKey.isValidNonce("!#[]~"))
    }

    @Test(
        "htu leaves out query, fragment and userinfo and is normalised as RFC 3986 §6.2.2 and §6.2.3 say",
        arguments: [
            ("https://user:secret@API.Example.COM:443/a/./b/../c?x=1#frag", "https://api.example.com/a/c"),
            ("HTTPS://api.example.com", "https://api.example.com/"),
            ("http://api.example.com:80/%7euser/%2f%41", "http://api.example.com/~user/%2FA"),
            ("https://api.example.com:8443/x/..", "https://api.example.com:8443/"),
            ("https://api.example.com/a//b/.", "https://api.example.com/a//b/"),
        ]
    )
    func targetURINormalised(_ input: String, _ expected: String) throws {
        #expect(DPoPKey.targetURI(try #require(URL(string: input))) == expected)
    }

    @Test("dpop.proof's parameters are checked before the session: a bad nonce is invalid_params with or without one")
    func proofParametersFirst() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let connection = try daemon.connect()
        let proof = #"{"jsonrpc":"2.0","id":2,"method":"dpop.proof","params":{"provider":"mock","htm":"GET","htu":"https://api.example.com/","nonce":"a b"}}"#
        #expect(try exchange(connection, proof).errorReason == "invalid_params")
        _ = try exchange(connection, Providers.mockLogin)
        #expect(try exchange(connection, proof).errorReason == "invalid_params")
        let good = proof.replacingOccurrences(of: "a b", with: "ab")
        #expect(try exchange(connection, good).errorReason == "unsupported_grant", "a Bearer session: the parameters passed")
    }
}
