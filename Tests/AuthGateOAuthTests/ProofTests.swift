import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Crypto
import Foundation
import Testing

@testable import AuthGateOAuth

/// The parts of a compact JWS, decoded.
private struct DecodedJWS {
    var header: [String: Any]
    var claims: [String: Any]
    var signingInput: [UInt8]
    var signature: [UInt8]

    init(_ compact: String) throws {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        func object(_ part: String) throws -> [String: Any] {
            let bytes = try #require(Base64URL.decode(part))
            return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        }
        header = try object(parts[0])
        claims = try object(parts[1])
        signingInput = Array((parts[0] + "." + parts[1]).utf8)
        signature = try #require(Base64URL.decode(parts[2]))
    }
}

/// A transport that answers from a script and keeps what it was sent.
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [HTTPResponse]
    private(set) var sent: [HTTPRequest] = []

    init(_ answers: [HTTPResponse]) { self.answers = answers }

    func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse {
        lock.withLock {
            sent.append(request)
            return answers.isEmpty ? HTTPResponse(status: 500) : answers.removeFirst()
        }
    }

    func header(_ name: String, of index: Int) -> String? {
        lock.withLock { sent[index].headers.first { $0.name == name }?.value }
    }

    func request(_ index: Int) -> HTTPRequest {
        lock.withLock { sent[index] }
    }
}

private func nonceChallenge(_ nonce: String) -> HTTPResponse {
    HTTPResponse(status: 400, headers: ["dpop-nonce": nonce, "content-type": "application/json"], body: Array(#"{"error":"use_dpop_nonce"}"#.utf8))
}

private let dpopTokens = HTTPResponse(
    status: 200,
    headers: ["content-type": "application/json"],
    body: Array(#"{"access_token":"at-1","token_type":"DPoP","expires_in":300}"#.utf8)
)

@Suite("DPoP proofs and client assertions, in process")
struct ProofTests {
    @Test("a DPoP proof: dpop+jwt with the public JWK, htm, htu without query, iat, unique jti, ath; a valid ES256 signature")
    func proofShape() throws {
        let key = DPoPKey()
        let token = Secret("access-token-1")
        let proof = try DecodedJWS(
            key.proof(
                method: "GET",
                url: URL(string: "https://api.example.test/v1/items?page=2#top")!,
                nonce: "n-1",
                accessToken: token,
                at: Date(timeIntervalSince1970: 1_800_000_000)
            )
        )
        #expect(proof.header["typ"] as? String == "dpop+jwt" && proof.header["alg"] as? String == "ES256")
        let jwk = try #require(proof.header["jwk"] as? [String: String])
        #expect(jwk.keys.sorted() == ["crv", "kty", "x", "y"], "the public key only: no d")
        #expect(proof.claims["htm"] as? String == "GET")
        #expect(proof.claims["htu"] as? String == "https://api.example.test/v1/items")
        #expect(proof.claims["iat"] as? Int == 1_800_000_000)
        #expect(proof.claims["nonce"] as? String == "n-1")
        #expect(proof.claims["ath"] as? String == Base64URL.encode(Array(SHA256.hash(data: Array("access-token-1".utf8)))))
        let other = try DecodedJWS(key.proof(method: "GET", url: URL(string: "https://api.example.test/")!, at: Date()))
        #expect(other.claims["jti"] as? String != proof.claims["jti"] as? String)
        #expect(other.claims["ath"] == nil && other.claims["nonce"] == nil)

        // The signature verifies with the key in the header, as a server does it.
        let x = try #require(Base64URL.decode(jwk["x"]!))
        let y = try #require(Base64URL.decode(jwk["y"]!))
        let publicKey = try P256.Signing.PublicKey(rawRepresentation: x + y)
        #expect(publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: proof.signature), for: proof.signingInput))

        // RFC 7638: the SHA-256 of the required members in lexicographic order, no spaces.
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(jwk["x"]!)","y":"\#(jwk["y"]!)"}"#
        #expect(key.thumbprint == Base64URL.encode(Array(SHA256.hash(data: Array(canonical.utf8)))))
        #expect("\(key)" == "DPoPKey(jkt: \(key.thumbprint))", "the key prints as its thumbprint only")
    }

    @Test("the key survives its storage form, and garbage is refused")
    func storage() throws {
        let key = DPoPKey()
        let restored = try DPoPKey(storageRepresentation: key.storageRepresentation)
        #expect(restored.thumbprint == key.thumbprint)
        #expect(throws: (any Error).self) { try DPoPKey(storageRepresentation: [1, 2, 3]) }
    }

    @Test("use_dpop_nonce is answered once with the nonce, which is kept for the next request; a second demand is dpop_rejected")
    func nonceRetry() async throws {
        let transport = ScriptedTransport([nonceChallenge("n-1"), dpopTokens, dpopTokens, nonceChallenge("n-2"), nonceChallenge("n-3")])
        let endpoint = TokenEndpoint(
            provider: "corp",
            client: ClientAuthenticator(clientID: "c", method: .none, secret: nil, signingKey: nil),
            transport: transport,
            policy: HTTPRequestPolicy()
        )
        let key = DPoPKey()
        let url = URL(string: "https://idp.example.test/token")!
        let tokens = try await endpoint.requestTokens(
            at: url,
            [("grant_type", "client_credentials")],
            purpose: .clientSignIn,
            requestedScopes: [],
            proofKey: key,
            now: Date()
        )
        #expect(tokens.tokenType == "DPoP" && tokens.proofKey == key)
        #expect(try DecodedJWS(try #require(transport.header("DPoP", of: 0))).claims["nonce"] == nil)
        #expect(try DecodedJWS(try #require(transport.header("DPoP", of: 1))).claims["nonce"] as? String == "n-1")
        _ = try await endpoint.requestTokens(
            at: url,
            [("grant_type", "client_credentials")],
            purpose: .clientSignIn,
            requestedScopes: [],
            proofKey: key,
            now: Date()
        )
        #expect(try DecodedJWS(try #require(transport.header("DPoP", of: 2))).claims["nonce"] as? String == "n-1", "remembered for the provider")
        let error = await #expect(throws: AuthGateError.self) {
            try await endpoint.requestTokens(
                at: url,
                [("grant_type", "client_credentials")],
                purpose: .clientSignIn,
                requestedScopes: [],
                proofKey: key,
                now: Date()
            )
        }
        #expect(error?.reason == .dpopRejected && error?.message.contains("twice") == true, "\(String(describing: error))")
        #expect(transport.sent.count == 5, "one retry, not a loop")
    }

    @Test("a Bearer answer to a DPoP request is refused: the file requires bound tokens")
    func bearerRefused() async throws {
        let bearer = HTTPResponse(status: 200, body: Array(#"{"access_token":"at-1","token_type":"Bearer","expires_in":300}"#.utf8))
        let endpoint = TokenEndpoint(
            provider: "corp",
            client: ClientAuthenticator(clientID: "c", method: .none, secret: nil, signingKey: nil),
            transport: ScriptedTransport([bearer]),
            policy: HTTPRequestPolicy()
        )
        let error = await #expect(throws: AuthGateError.self) {
            try await endpoint.requestTokens(
                at: URL(string: "https://idp.example.test/token")!,
                [],
                purpose: .clientSignIn,
                requestedScopes: [],
                proofKey: DPoPKey(),
                now: Date()
            )
        }
        #expect(error?.reason == .dpopRejected)
    }

    @Test(
        "client assertions: iss = sub = client, aud the endpoint, unique jti, exp a minute ahead; ES256 and HS256 signatures verify (RS256: against idpyoidc)"
    )
    func assertions() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let audience = URL(string: "https://idp.example.test/token")!
        let ec = P256.Signing.PrivateKey()
        let ecClient = ClientAuthenticator(
            clientID: "svc",
            method: .privateKeyJWT,
            secret: nil,
            signingKey: ClientSigningKey(pem: ec.pemRepresentation, keyID: "k1")
        )
        let first = try DecodedJWS(ecClient.assertion(audience: audience, now: now))
        #expect(first.header["alg"] as? String == "ES256" && first.header["kid"] as? String == "k1")
        #expect(first.claims["iss"] as? String == "svc" && first.claims["sub"] as? String == "svc")
        #expect(first.claims["aud"] as? String == audience.absoluteString)
        #expect(first.claims["exp"] as? Int == 1_800_000_060 && first.claims["iat"] as? Int == 1_800_000_000)
        #expect(ec.publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: first.signature), for: first.signingInput))
        #expect(try DecodedJWS(ecClient.assertion(audience: audience, now: now)).claims["jti"] as? String != first.claims["jti"] as? String)

        let secretClient = ClientAuthenticator(clientID: "svc", method: .clientSecretJWT, secret: Secret("s3cret"), signingKey: nil)
        let hs = try DecodedJWS(secretClient.assertion(audience: audience, now: now))
        #expect(hs.header["alg"] as? String == "HS256")
        #expect(HMAC<SHA256>.isValidAuthenticationCode(hs.signature, authenticating: hs.signingInput, using: SymmetricKey(data: Array("s3cret".utf8))))

        var fields: [(String, String)] = []
        var headers: [(name: String, value: String)] = []
        ecClient.authenticate(fields: &fields, headers: &headers, endpoint: audience, now: now)
        #expect(fields.map(\.0) == ["client_id", "client_assertion_type", "client_assertion"])
        #expect(fields[1].1 == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        #expect(headers.isEmpty, "no secret in a header")
        #expect(ClientSigningKey(pem: "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", keyID: nil) == nil)
    }

    @Test("pushed authorization responses: a request_uri and a positive expires_in, or a sentence")
    func pushedResponses() throws {
        let good = HTTPResponse(status: 201, body: Array(#"{"request_uri":"urn:ietf:params:oauth:request_uri:abc","expires_in":60}"#.utf8))
        #expect(try PushedAuthorization.parse(good, provider: "corp") == "urn:ietf:params:oauth:request_uri:abc")
        for body in [#"{"expires_in":60}"#, #"{"request_uri":"has space:x","expires_in":60}"#, #"{"request_uri":"urn:x:y"}"#, "[]"] {
            #expect(throws: AuthGateError.self) { try PushedAuthorization.parse(HTTPResponse(status: 201, body: Array(body.utf8)), provider: "corp") }
        }
    }
}
