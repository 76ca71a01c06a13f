import AuthGateCore
import Crypto
import Foundation
import Synchronization
import Testing
import _CryptoExtras

@testable import AuthGateOAuth

/// An RSA key made for the tests, its JWKS, and ID tokens it signs (RS256).
private enum TestIssuer {
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let issuer = "https://sso.example.test"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static var jwks: [UInt8] {
        let primitives = try! key.publicKey.getKeyPrimitives()
        let n = Base64URL.encode(Array(primitives.modulus))
        let e = Base64URL.encode(Array(primitives.publicExponent))
        return Array(#"{"keys":[{"kty":"RSA","kid":"k1","alg":"RS256","use":"sig","n":"\#(n)","e":"\#(e)"}]}"#.utf8)
    }

    /// The claims of a valid token for client `cli`, with `changes` applied (`nil` removes one).
    static func claims(_ changes: [String: Any?] = [:]) -> [String: Any] {
        var claims: [String: Any] = [
            "iss": issuer, "sub": "alice-id", "aud": "cli", "exp": now.timeIntervalSince1970 + 300, "iat": now.timeIntervalSince1970 - 10,
            "nonce": "n-1", "preferred_username": "alice",
        ]
        for (name, value) in changes {
            if let value { claims[name] = value } else { claims.removeValue(forKey: name) }
        }
        return claims
    }

    static func token(_ claims: [String: Any], header: [String: Any] = ["alg": "RS256", "kid": "k1", "typ": "JWT"]) throws -> String {
        let input =
            Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: header))) + "."
            + Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        let signature = try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}

/// How many times a verifier fetched its JWKS.
private final class FetchCount: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}

/// A verifier whose JWKS fetches are counted.
private func makeVerifier(jwks: [UInt8] = TestIssuer.jwks) -> (IDTokenVerifier, FetchCount) {
    let fetches = FetchCount()
    let verifier = IDTokenVerifier(provider: "corp") { () async throws(AuthGateError) -> [UInt8] in
        fetches.add()
        return jwks
    }
    return (verifier, fetches)
}

private func refusal(_ token: String, nonce: String? = "n-1") async -> String? {
    do throws(AuthGateError) {
        _ = try await makeVerifier().0.verify(Secret(token), issuer: TestIssuer.issuer, clientID: "cli", nonce: nonce, now: TestIssuer.now)
        return nil
    } catch {
        #expect(error.reason == .serverError)
        return error.message
    }
}

/// ID tokens signed with a key made here, checked as a sign-in checks them (OpenID Connect
/// Core §3.1.3.7).
@Suite("ID token verification with keys made in the test")
struct IDTokenVerifierTests {
    @Test("a token signed with the published key, for this client and nonce, in date, is accepted with its claims")
    func valid() async throws {
        let (verifier, fetches) = makeVerifier()
        let claims = try await verifier.verify(
            Secret(try TestIssuer.token(TestIssuer.claims())),
            issuer: TestIssuer.issuer,
            clientID: "cli",
            nonce: "n-1",
            now: TestIssuer.now
        )
        #expect(claims.sub == "alice-id" && claims.displayName == "alice")
        _ = try await verifier.verify(
            Secret(try TestIssuer.token(TestIssuer.claims())),
            issuer: TestIssuer.issuer,
            clientID: "cli",
            nonce: nil,
            now: TestIssuer.now
        )
        #expect(fetches.value == 1, "the JWKS is fetched once")
        // Expired 30 s ago: inside the minute of clock skew tolerated.
        #expect(await refusal(try TestIssuer.token(TestIssuer.claims(["exp": TestIssuer.now.timeIntervalSince1970 - 30]))) == nil)
    }

    /// Each refused claim: what changes in a valid token's claims (`nil` removes one), and the
    /// words of the refusal.
    /// Read only, by the tests; `Any` is not Sendable.
    nonisolated(unsafe) private static let refusedClaims: [String: ([String: Any?], String)] = [
        "another issuer": (["iss": "https://evil.example.test"], "was issued by \"https://evil.example.test\""),
        "another audience": (["aud": "another-client"], "not meant for this client (aud)"),
        "several audiences, no azp": (["aud": ["cli", "other"]], "another party (azp)"),
        "another azp": (["aud": ["cli", "other"], "azp": "other"], "another party (azp)"),
        "expired": (["exp": 1_800_000_000 - 120], "has expired"),
        "issued in the future": (["iat": 1_800_000_000 + 600], "issued in the future (iat)"),
        "another nonce": (["nonce": "n-2"], "nonce does not match"),
        "no nonce": (["nonce": nil], "nonce does not match"),
    ]

    @Test(
        "a token is refused for its issuer, audience, authorized party, expiry, issue time or nonce, each named",
        arguments: [
            "another issuer", "another audience", "several audiences, no azp", "another azp", "expired", "issued in the future", "another nonce", "no nonce",
        ]
    )
    func refusedClaims(name: String) async throws {
        let (changes, why) = try #require(Self.refusedClaims[name])
        let message = await refusal(try TestIssuer.token(TestIssuer.claims(changes)))
        #expect(message?.contains(why) == true, "\(message ?? "accepted")")
    }

    @Test("a token whose claims were changed after signing, or signed by another key under the published kid, does not verify")
    func badSignatures() async throws {
        let token = try TestIssuer.token(TestIssuer.claims())
        let parts = token.split(separator: ".").map(String.init)
        let forged = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: TestIssuer.claims(["sub": "mallory"]))))
        #expect(await refusal(parts[0] + "." + forged + "." + parts[2])?.contains("signature does not verify") == true)

        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let input = parts[0] + "." + parts[1]
        let otherSignature = try other.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        #expect(await refusal(input + "." + Base64URL.encode(Array(otherSignature.rawRepresentation)))?.contains("signature does not verify") == true)
    }

    @Test(
        "alg none, HMAC and unknown algorithms are refused before any key is looked at; so is what is not a JWT",
        arguments: ["none", "HS256", "XY999"]
    )
    func refusedAlgorithms(algorithm: String) async throws {
        let token = try TestIssuer.token(TestIssuer.claims(), header: ["alg": algorithm, "kid": "k1"])
        let message = await refusal(token)
        #expect(message?.contains("algorithm") == true, "\(message ?? "accepted")")
        #expect(await refusal("not.a-jwt")?.contains("not a signed JWT") == true)
    }

    @Test("an unknown kid fetches the JWKS once more (a rotation) and is refused when still unknown")
    func unknownKeyID() async throws {
        let (verifier, fetches) = makeVerifier()
        let token = try TestIssuer.token(TestIssuer.claims(), header: ["alg": "RS256", "kid": "k9"])
        _ = try await verifier.verify(
            Secret(try TestIssuer.token(TestIssuer.claims())),
            issuer: TestIssuer.issuer,
            clientID: "cli",
            nonce: nil,
            now: TestIssuer.now
        )
        let error = await #expect(throws: AuthGateError.self) {
            try await verifier.verify(Secret(token), issuer: TestIssuer.issuer, clientID: "cli", nonce: nil, now: TestIssuer.now)
        }
        #expect(error?.message.contains("does not publish (kid k9)") == true && fetches.value == 2)
    }

    @Test("a token without a kid is verified with the one published key that fits its algorithm")
    func noKeyID() async throws {
        let claims = try await makeVerifier().0.verify(
            Secret(try TestIssuer.token(TestIssuer.claims(), header: ["alg": "RS256"])),
            issuer: TestIssuer.issuer,
            clientID: "cli",
            nonce: nil,
            now: TestIssuer.now
        )
        #expect(claims.sub == "alice-id")
    }

    @Test("a JWKS that is not one, or holds no usable key, is the provider's fault (server_error)")
    func badJWKS() async throws {
        for jwks in [#"{"keys":"none"}"#, #"{"keys":[{"kty":"RSA","kid":"k1","n":"x"}]}"#, "<html>"] {
            let error = await #expect(throws: AuthGateError.self) {
                try await makeVerifier(jwks: Array(jwks.utf8)).0.verify(
                    Secret(try TestIssuer.token(TestIssuer.claims())),
                    issuer: TestIssuer.issuer,
                    clientID: "cli",
                    nonce: nil,
                    now: TestIssuer.now
                )
            }
            #expect(error?.reason == .serverError && error?.message.contains("JWKS") == true, "\(error.map { "\($0)" } ?? "")")
        }
    }
}
