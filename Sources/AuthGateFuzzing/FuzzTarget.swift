// The fuzz entry points reach the modules' internals with `@testable`, which only builds
// compiled with testability allow: debug builds, and the full test run's release build
// (AUTHGATE_TESTABLE, Package.swift). In a plain release build (`swift build -c release` of the
// whole package) this module is empty, and nothing else in a release product uses it.
#if DEBUG || AUTHGATE_TESTABLE
@testable import AuthGateCore
@testable import AuthGateDaemon
import AuthGateHTTP
@testable import AuthGateOAuth
import AuthGateRPC
@testable import AuthGateServer
import AuthGateTools
import Dispatch
import FoundationEssentials
import Logging

/// The parsers that read bytes from outside, one entry each, for coverage-guided fuzzing
/// (`scripts/fuzz`, libFuzzer) and for the regression replay of every committed input in the
/// ordinary test suite (`FuzzReplayTests`). Each runs any input to an answer: an error value,
/// never a trap; a trap, or an expectation a target checks failing, is a crash libFuzzer keeps.
///
/// Built only with testability (it reaches the modules' internals with `@testable`); empty in a plain release build.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// An RPC line: the cached path's scanner and the CLI's plain JSON reader against the JSON
    /// decoder (differential), then the whole dispatcher, which must answer every line (and
    /// whose answer the plain reader must read as the decoder does).
    case rpcLine = "rpc-line"
    /// A provider file's bytes through the configuration loader.
    case providerFile = "provider-file"
    /// A token endpoint's answer (status from the first byte, body from the rest): the strict
    /// reader and the error mapping for every purpose.
    case tokenResponse = "token-response"
    /// A discovery document.
    case discovery
    /// A JWKS, as the ID token verifier loads it.
    case jwks
    /// An ID token handed to the verifier (header, claims, signature), against a fixed JWKS.
    case idToken = "id-token"
    /// The query of a redirect to the loopback listener.
    case redirectQuery = "redirect-query"
    /// A sealed sessions file (first byte 0), or a plaintext sealed with the test key first
    /// (first byte 1), so that the JSON reader behind the decryption is reached too.
    case sessionFile = "session-file"
    /// A device authorization response (RFC 8628 §3.2).
    case deviceResponse = "device-response"
    /// A line `authgate sink` reads from a watch: an answer or a notification.
    case watchLine = "watch-line"
    /// What the credential helpers and the kubectl plugin read (first byte: 0 git's
    /// `key=value` lines, 1 a docker server URL, 2 `KUBERNETES_EXEC_INFO`, 3 a configured host).
    case helperInput = "helper-input"
    /// A pushed authorization response (RFC 9126 §2.2): status from the first byte, body from
    /// the rest; the reader and the error mapping.
    case parResponse = "par-response"
    /// An answer that may demand a DPoP nonce (RFC 9449 §8): status from the first byte, then
    /// the `DPoP-Nonce` header's value up to the first newline, then the body.
    case dpopNonce = "dpop-nonce"
    /// A token exchange answer (RFC 8693 §2.2): status from the first byte, body from the rest.
    case exchangeResponse = "exchange-response"

    /// Runs one input.
    public func run(_ bytes: [UInt8]) {
        switch self {
        case .rpcLine: Self.rpcLine(bytes)
        case .providerFile: _ = ProviderConfigurationLoader.parse(Data(bytes), id: "fuzz", file: "fuzz.json")
        case .tokenResponse: Self.tokenResponse(bytes)
        case .discovery:
            if let object = (try? JSONValue.parse(Data(bytes)))?.objectValue {
                _ = try? ProviderMetadata.discovered(object, overrides: .init())
            }
        case .jwks: Self.wait { _ = try? await IDTokenVerifier(provider: "fuzz") { bytes }.reload() }
        case .idToken: Self.idToken(bytes)
        case .redirectQuery: _ = LoopbackRedirectListener.parseQuery(String(decoding: bytes, as: UTF8.self))
        case .sessionFile: Self.sessionFile(bytes)
        case .deviceResponse:
            if let object = (try? JSONValue.parse(Data(bytes)))?.objectValue {
                _ = try? DeviceAuthorizationGrant.parse(object, provider: "fuzz", now: Date(timeIntervalSince1970: 1_800_000_000))
            }
        case .helperInput:
            let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
            switch bytes.first.map({ $0 % 4 }) {
            case 0:
                _ = CredentialHost.gitAttributes(text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))["host"]
                    .flatMap(CredentialHost.normalize)
            case 1: _ = CredentialHost.fromServerURL(text)
            case 2: _ = KubernetesExecInfo.parse(Array(bytes.dropFirst()))
            default:
                // Normalizing is idempotent: what it gives, it gives back unchanged.
                if let host = CredentialHost.normalize(text), CredentialHost.normalize(host) != host {
                    fatalError("CredentialHost.normalize is not idempotent on \(text.debugDescription)")
                }
            }
        case .parResponse:
            let response = Self.response(bytes)
            _ = try? PushedAuthorization.parse(response, provider: "fuzz")
            _ = Fixtures.tokenEndpoint.refusal(response, purpose: .interactiveSignIn, what: "pushed authorization request")
        case .dpopNonce:
            let rest = bytes.dropFirst()
            let header = rest.prefix { $0 != UInt8(ascii: "\n") }
            let response = HTTPResponse(
                status: bytes.first.map { $0 % 2 == 0 ? 400 : 401 } ?? 400,
                headers: ["dpop-nonce": String(decoding: header, as: UTF8.self), "www-authenticate": "DPoP error=\"use_dpop_nonce\""],
                body: Array(rest.dropFirst(header.count + 1))
            )
            // A nonce taken from the answer goes into every later proof: it must be one.
            if let nonce = DPoPNonce.challenge(in: response), !DPoPKey.isValidNonce(nonce) {
                fatalError("DPoPNonce.challenge returned an invalid nonce \(nonce.debugDescription)")
            }
        case .exchangeResponse:
            let response = Self.response(bytes)
            let endpoint = Fixtures.tokenEndpoint
            if let tokens = try? endpoint.parse(response, requestedScopes: ["read"], now: Date(timeIntervalSince1970: 1_800_000_000)) {
                _ = try? TokenExchangeGrant.issuedTokenType(tokens, provider: "fuzz")
            }
            _ = endpoint.refusal(response, purpose: .exchange, scopes: ["read"])
        case .watchLine:
            Self.answerReadersAgree(bytes)
            _ = try? RPCCoding.makeDecoder().decode(RPCNotification<TokenChanged>.self, from: Data(bytes))
            _ = try? RPCCoding.makeDecoder().decode(RPCNotification<SessionEnded>.self, from: Data(bytes))
        }
    }

    // MARK: The targets

    private static func rpcLine(_ bytes: [UInt8]) {
        let decoded = try? RPCCoding.makeDecoder().decode(DecodedRequest.self, from: Data(bytes))
        if let plain = bytes.withUnsafeBytes({ PlainTokenRequest($0) }) {
            // Whatever the scanner accepts, the decoder must read the same way.
            guard let decoded, decoded.envelope.jsonrpc == "2.0", Self.sameRequest(plain, decoded),
                (try? RPCCoding.makeDecoder().decode(RPCID.self, from: Data(plain.id))) == decoded.envelope.id
            else {
                fatalError("the scanner and the decoder disagree about \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
        plainReaderAgrees(bytes)
        let dispatcher = Fixtures.dispatcher
        wait {
            let answer = await dispatcher.respond(to: Data(bytes), from: PeerCredentials(pid: 1, uid: 1000, gid: 1000))
            if let answer, !answer.isEmpty, (try? JSONValue.parse(answer)) == nil {
                fatalError("the dispatcher answered something that is not JSON")
            }
            // The CLI reads the daemon's answers with the plain reader and RPCLine's fast forms.
            if let answer {
                plainReaderAgrees(Array(answer))
                answerReadersAgree(Array(answer))
            }
        }
    }

    /// Whatever ``RPCLine``'s answer readers take from a line, the decoder takes the same: the
    /// bare access token, and the result.
    private static func answerReadersAgree(_ bytes: [UInt8]) {
        _ = try? RPCConnection.decodeReply(bytes, id: RPCLine.clientID, as: TokenResult.self)
        if let bare = RPCLine.bareAccessToken(in: bytes),
            (try? RPCConnection.decodeReply(bytes, id: RPCLine.clientID, as: AccessTokenOnly.self))?.access_token != bare
        {
            fatalError("RPCLine.bareAccessToken and the decoder disagree about \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
        if let result = RPCLine.result(in: bytes), let parsed = try? JSONValue.parse(Data(bytes)), parsed.objectValue?["result"] != result {
            fatalError("RPCLine.result and the decoder disagree about \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
    }

    /// What `authgate token` prints of a `token` answer.
    private struct AccessTokenOnly: Decodable {
        // swift-format-ignore: AlwaysUseLowerCamelCase
        var access_token: String
    }

    /// Whatever the CLI's plain JSON reader reads, the JSON decoder reads as the same value.
    private static func plainReaderAgrees(_ bytes: [UInt8]) {
        guard let plain = JSONValue.readPlain(bytes) else { return }
        guard (try? JSONValue.parse(Data(bytes))) == plain else {
            fatalError("the plain JSON reader and the decoder disagree about \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
    }

    /// Whether the decoder read the call the scanner read.
    private static func sameRequest(_ plain: PlainTokenRequest, _ decoded: DecodedRequest) -> Bool {
        switch plain.target {
        case .session(let provider, let session):
            guard decoded.envelope.method == "token", let params = try? decoded.params.get() as? TokenParams else { return false }
            return params.provider == provider && params.session == session && params.minValidSeconds == plain.minimumValidity
                && params.forceRefresh != true && params.scopes == nil && params.resource == nil
        case .credential(let host, let tool):
            guard decoded.envelope.method == "credential.get", let params = try? decoded.params.get() as? CredentialParams else { return false }
            return params == CredentialParams(host: host, tool: tool, minValidSeconds: plain.minimumValidity)
        }
    }

    /// A provider's answer: the status from the first byte, the body from the rest.
    private static func response(_ bytes: [UInt8], statuses: [Int] = [200, 201, 400, 401, 403, 429, 500, 503]) -> HTTPResponse {
        let status = statuses[Int(bytes.first ?? 0) % statuses.count]
        return HTTPResponse(status: status, headers: ["content-type": "application/json", "retry-after": "7"], body: Array(bytes.dropFirst()))
    }

    private static func tokenResponse(_ bytes: [UInt8]) {
        let response = Self.response(bytes, statuses: [200, 400, 401, 403, 429, 500, 503])
        let endpoint = Fixtures.tokenEndpoint
        _ = try? endpoint.parse(response, requestedScopes: ["openid"], now: Date(timeIntervalSince1970: 1_800_000_000))
        for purpose in [TokenPurpose.passwordSignIn, .clientSignIn, .refresh, .interactiveSignIn] {
            _ = endpoint.refusal(response, purpose: purpose, scopes: ["openid"])
        }
    }

    private static func idToken(_ bytes: [UInt8]) {
        let token = String(decoding: bytes, as: UTF8.self)
        wait {
            let verifier = IDTokenVerifier(provider: "fuzz") { Array(Fixtures.jwks.utf8) }
            _ = try? await verifier.verify(
                Secret(token),
                issuer: "https://fuzz.example.com",
                clientID: "fuzz",
                nonce: "n",
                now: Date(timeIntervalSince1970: 1_800_000_000)
            )
        }
    }

    private static func sessionFile(_ bytes: [UInt8]) {
        let file: [UInt8]
        if bytes.first == 1 {
            guard let sealed = try? SealedSessionsFile.fileContents(sealing: Data(bytes.dropFirst()), uid: 1000, key: Fixtures.storageKey) else { return }
            file = sealed
        } else {
            file = Array(bytes.dropFirst())
        }
        _ = SealedSessionsFile.open(file, uid: 1000, key: Fixtures.storageKey, file: "fuzz.sessions")
    }

    /// Runs async work to its end from a synchronous entry point.
    private static func wait(_ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task {
            await body()
            done.signal()
        }
        done.wait()
    }
}

/// What the targets need, made once.
private enum Fixtures {
    static let quiet = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })

    static let tokenEndpoint = TokenEndpoint(
        provider: "fuzz",
        client: ClientAuthenticator(clientID: "fuzz", method: .none, secret: nil, signingKey: nil),
        transport: NoTransport(),
        policy: HTTPRequestPolicy()
    )

    static let storageKey = StorageKey(rawBytes: Array(repeating: 7, count: StorageKey.byteCount))!

    /// A public RSA key (no private half exists anywhere): tokens verify up to the signature.
    static let jwks = #"""
        {"keys": [{"kty": "RSA", "kid": "fuzz-1", "use": "sig", "alg": "RS256", "n": "nYp7Nt5NGyXXaPaXJ1ZVdyAAEBt9-qyIFldGguvWj10pypIVUXqO--IGa81UTeR0Yec9FF-O-tPlpY0dN_6SSGhR7QXUzSqLdI0l5AEm4X3XO7XqSjLd2-Jab9Mk1KYhRRbi5Pf81GIRgHB3xIUjci7Ruzxjicag2wD0dUdjz-lxuB8OMRRG2Ju004An-yhbqaH7ZYNGX5PaN47eXB8BSK9yMVu5E2qMc3FSrxtT0yvGtczrkuQ8KpYeqD0Ow2pckXe7bxbSwOMR8XCf0-w96TcLKrimXB_2tuXLz105VvXNulO5rcZGeQdhDzv6gKdOzq-sgwutvuM36t9TtwgQSw", "e": "AQAB"}]}
        """#

    /// A dispatcher with one mock provider and nothing on disk.
    static let dispatcher: RPCDispatcher = {
        let mock = ProviderConfigurationLoader.parse(
            Data(#"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}]}"#.utf8),
            id: "mock",
            file: "mock.json"
        )
        let registry = ProviderRegistry([RegisteredProvider.make(mock, logger: quiet)])
        let context = DaemonContext(configDirectory: "/nonexistent", mode: .user, socketPath: "/nonexistent/s.sock")
        return RPCDispatcher(methods: .inMemory(registry: registry, context: context, logger: quiet), logger: quiet)
    }()
}

/// Provider HTTP that never leaves the process: the targets only parse.
private struct NoTransport: HTTPTransport {
    func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse {
        HTTPResponse(status: 503)
    }
}
#endif
