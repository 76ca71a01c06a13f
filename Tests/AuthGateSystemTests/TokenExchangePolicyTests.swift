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

/// What `token.exchange` may ask a provider for, and what it hands out: never a refresh token.
@Suite("Token exchange: what may be asked for and issued", .serialized)
struct TokenExchangePolicyTests {
    // MARK: Token exchange never hands out a refresh token

    @Test("requested_token_type naming a refresh token (or anything but an access token, JWT or ID token) is invalid_params before any request")
    func exchangeRefusesRefreshTokens() throws {
        for type in [TokenExchangePolicy.refreshToken, "urn:ietf:params:oauth:token-type:saml2", "urn:example:custom"] {
            let variant = TokenVariant(exchange: .init(audience: "api", requestedTokenType: type))
            #expect(throws: AuthGateError.self) { try variant.validate() }
            do { try variant.validate() } catch { #expect(error.reason == .invalidParams && error.message.contains("refresh token"), "\(error)") }
        }
        for type in TokenExchangePolicy.issuableTypes {
            try TokenVariant(exchange: .init(audience: "api", requestedTokenType: type)).validate()
        }
        // Through the socket, with no session and no request to any provider.
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let reply = try exchange(
            daemon.connect(),
            #"{"jsonrpc":"2.0","id":1,"method":"token.exchange","params":{"provider":"mock","audience":"api","requested_token_type":"\#(TokenExchangePolicy.refreshToken)"}}"#
        )
        #expect(reply.errorReason == "invalid_params", "\(reply)")
    }

    @Test("a refresh token issued by an exchange is refused, whatever was asked for")
    func issuedRefreshTokenRefused() throws {
        var issued = TokenSet(accessToken: Secret("rt"), expiresAt: Date().addingTimeInterval(60))
        issued.issuedTokenType = TokenExchangePolicy.refreshToken
        #expect(throws: AuthGateError.self) { try TokenExchangeGrant.issuedTokenType(issued, provider: "p") }
        issued.issuedTokenType = TokenExchangePolicy.jwt
        #expect(try TokenExchangeGrant.issuedTokenType(issued, provider: "p") == TokenExchangePolicy.jwt)
    }

    @Test("a provider file lists the audiences and token types token.exchange may ask for; a type it cannot allow is a config error")
    func exchangePolicyInTheFile() {
        let base = #"{"type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"]"#
        let report = ProviderConfigurationLoader.parse(
            Data((base + #", "token_exchange": {"audiences": ["https://api.example.com"], "requested_token_types": ["\#(TokenExchangePolicy.jwt)"]}}"#).utf8),
            id: "p",
            file: "p.json"
        )
        guard case .oauth2(let remote) = report.configuration?.settings else {
            Issue.record("\(report.problems)")
            return
        }
        #expect(remote.tokenExchange.audiences == ["https://api.example.com"] && remote.tokenExchange.requestedTokenTypes == [TokenExchangePolicy.jwt])
        let refused = ProviderConfigurationLoader.parse(
            Data((base + #", "token_exchange": {"requested_token_types": ["\#(TokenExchangePolicy.refreshToken)"]}}"#).utf8),
            id: "p",
            file: "p.json"
        )
        #expect(
            refused.problems.map(\.description).contains {
                $0.contains("$.token_exchange.requested_token_types[0]") && $0.contains("refresh token is never handed out")
            },
            "\(refused.problems)"
        )
    }
}
