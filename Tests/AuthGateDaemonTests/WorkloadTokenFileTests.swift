import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateDaemon
@testable import AuthGateOAuth

/// A JWT-shaped token with `claims` (its signature is not checked by the daemon, only by the
/// provider).
private func platformJWT(_ claims: [String: Any]) throws -> String {
    let header = Base64URL.encode(Array(#"{"alg":"ES256","typ":"JWT"}"#.utf8))
    let payload = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
    return header + "." + payload + ".c2lnbmF0dXJl"
}

/// A transport that, like kubelet between two requests, rewrites `file` with `rotated` when
/// the first request arrives, and answers from a script.
private final class RotatingTransport: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [HTTPResponse]
    private let file: String
    private let rotated: String?
    private(set) var sent: [[String: String]] = []

    init(file: String, rotated: String?, answers: [HTTPResponse]) {
        self.file = file
        self.rotated = rotated
        self.answers = answers
    }

    func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse {
        lock.withLock {
            let form = String(decoding: request.body, as: UTF8.self).split(separator: "&").reduce(into: [String: String]()) { fields, pair in
                let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
                fields[parts[0]] = parts.count > 1 ? parts[1] : ""
            }
            if sent.isEmpty, let rotated { try? Data(rotated.utf8).write(to: URL(fileURLWithPath: file)) }
            sent.append(form)
            return answers.isEmpty ? HTTPResponse(status: 500) : answers.removeFirst()
        }
    }
}

private let invalidClient = HTTPResponse(
    status: 401,
    headers: ["content-type": "application/json"],
    body: Array(#"{"error":"invalid_client","error_description":"the client assertion is not trusted"}"#.utf8)
)
private let bearerTokens = HTTPResponse(
    status: 200,
    headers: ["content-type": "application/json"],
    body: Array(#"{"access_token":"at-1","token_type":"Bearer","expires_in":300}"#.utf8)
)

/// A service's provider whose platform token file is a revision number the test rotates.
private actor PlatformProvider: IdentityProvider {
    private(set) var serviceSignIns = 0
    nonisolated let revision = Mutex(1)
    let clock: ManualClock

    init(clock: ManualClock) { self.clock = clock }

    nonisolated func rotate() { revision.withLock { $0 += 1 } }

    nonisolated func platformTokenRevision(for grant: Grant) -> String? {
        grant == .tokenExchange ? "\(revision.withLock { $0 })" : nil
    }

    func signInAsService(_ grant: Grant, _ variant: TokenVariant, proofKey: DPoPKey?) async throws(AuthGateError) -> SignInResult {
        serviceSignIns += 1
        return SignInResult(
            tokens: TokenSet(accessToken: Secret("exchanged-\(serviceSignIns)"), expiresAt: clock.now.addingTimeInterval(3600)),
            subject: "client:x"
        )
    }

    func signIn(_ credentials: PasswordCredentials) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func register(_ registration: Registration) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func refresh(_ refreshToken: Secret, variant: TokenVariant) async throws(AuthGateError) -> TokenSet { throw AuthGateError(.unsupportedGrant, "no") }
    func signInAsClient(_ variant: TokenVariant) async throws(AuthGateError) -> SignInResult { throw AuthGateError(.unsupportedGrant, "no") }
    func userinfo(_ tokens: TokenSet) async throws(AuthGateError) -> [String: JSONValue] { [:] }
    func revoke(_ tokens: TokenSet) async {}
}

/// Workload identity federation: a service signs in with the short-lived JWT its
/// platform writes into a file, with no secret on disk.
@Suite("Workload identity: the platform's JWT from a file")
struct WorkloadTokenFileTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(
        "the file is read as it is now: a JWT whose exp is ahead; expired, not yet valid, without exp, not a JWT, missing or writable by others is workload_token_invalid naming the file and why"
    )
    func reading() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/token"
        let file = WorkloadTokenFile(path: path, field: "client_assertion_file", provider: "corp")
        let seconds = now.timeIntervalSince1970
        let valid = try platformJWT(["iss": "https://platform.test", "sub": "system:serviceaccount:apps:billing", "exp": seconds + 600, "jti": "a"])
        try scratch.write("token", valid + "\n")
        #expect(try file.read(now: now) == valid, "read, the newline kubelet does not write but people do trimmed")

        let cases: [(String, String)] = [
            (try platformJWT(["exp": seconds - 30]), "expired 30 s ago"),
            (try platformJWT(["exp": seconds + 600, "nbf": seconds + 300]), "not valid for another 300 s"),
            (try platformJWT(["sub": "x"]), "has no exp claim"),
            ("not a token", "does not hold a JWT"),
            ("a.b.c", "does not hold a JWT"),
        ]
        for (contents, why) in cases {
            try scratch.write("token", contents)
            let error = #expect(throws: AuthGateError.self) { try file.read(now: now) }
            #expect(error?.reason == .workloadTokenInvalid)
            #expect(error?.message.contains(why) == true && error?.message.contains(path) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("client_assertion_file") == true)
        }
        // A clock a little behind the platform's is tolerated (nbf within the leeway).
        try scratch.write("token", try platformJWT(["exp": seconds + 600, "nbf": seconds + 30]))
        #expect(throws: Never.self) { try file.read(now: now) }

        try scratch.write("token", valid)
        chmod(path, 0o666)
        let writable = #expect(throws: AuthGateError.self) { try file.read(now: now) }
        #expect(writable?.reason == .workloadTokenInvalid && writable?.message.contains("writable by everyone") == true, "\(writable?.message ?? "")")
        unlink(path)
        let missing = #expect(throws: AuthGateError.self) { try file.read(now: now) }
        #expect(missing?.reason == .workloadTokenInvalid && missing?.message.contains("cannot read") == true, "\(missing?.message ?? "")")
        #expect(missing?.message.contains(valid) == false)
    }

    @Test("kubelet's layout: the token file is a link to ..data/token, itself a link swapped to a new directory; each read follows it to the current token")
    func projectedVolumeLayout() throws {
        let scratch = try ScratchDirectory()
        let seconds = now.timeIntervalSince1970
        var tokens: [String] = []
        for generation in 1...2 {
            let directory = scratch.path + "/..2026_11_27_0\(generation)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            let token = try platformJWT(["exp": seconds + 600, "jti": "generation-\(generation)"])
            try scratch.write("..2026_11_27_0\(generation)/token", token)
            tokens.append(token)
            symlink("..2026_11_27_0\(generation)", scratch.path + "/..data_tmp")
            rename(scratch.path + "/..data_tmp", scratch.path + "/..data")
            if generation == 1 { symlink("..data/token", scratch.path + "/token") }
            let file = WorkloadTokenFile(path: scratch.path + "/token", field: "subject_token_file", provider: "corp")
            #expect(try file.read(now: now) == token)
        }
    }

    @Test("a refusal right after the platform rotated the file is retried once with the new token; with the file unchanged it is not, and says which file")
    func retriedOnceAfterRotation() async throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/token"
        let seconds = Date().timeIntervalSince1970
        let old = try platformJWT(["exp": seconds + 600, "jti": "old"])
        let new = try platformJWT(["exp": seconds + 600, "jti": "new"])
        try scratch.write("token", old)
        var client = ClientAuthenticator(clientID: "svc", method: .clientAssertionFile, secret: nil, signingKey: nil)
        client.assertionFile = WorkloadTokenFile(path: path, field: "client_assertion_file", provider: "corp")
        let url = URL(string: "https://idp.example.test/token")!

        let rotating = RotatingTransport(file: path, rotated: new, answers: [invalidClient, bearerTokens])
        let endpoint = TokenEndpoint(provider: "corp", client: client, transport: rotating, policy: HTTPRequestPolicy())
        let tokens = try await endpoint.requestTokens(
            at: url,
            [("grant_type", "client_credentials")],
            purpose: .clientSignIn,
            requestedScopes: [],
            now: Date()
        )
        #expect(tokens.accessToken.exposedValue == "at-1")
        #expect(rotating.sent.map { $0["client_assertion"] } == [old, new])
        #expect(rotating.sent.allSatisfy { $0["client_assertion_type"] == ClientAuthenticator.assertionType && $0["client_id"] == "svc" })

        // Refused again, nothing changed: one request, and the error names the file.
        let steady = RotatingTransport(file: path, rotated: nil, answers: [invalidClient, bearerTokens])
        let refused = TokenEndpoint(provider: "corp", client: client, transport: steady, policy: HTTPRequestPolicy())
        let error = await #expect(throws: AuthGateError.self) {
            try await refused.requestTokens(at: url, [("grant_type", "client_credentials")], purpose: .clientSignIn, requestedScopes: [], now: Date())
        }
        #expect(steady.sent.count == 1)
        #expect(error?.reason == .providerUnavailable && error?.message.contains(path) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains(new) == false)

        // The grant's own platform token (the subject token of an exchange) is retried the same way.
        try scratch.write("token", old)
        let exchange = RotatingTransport(
            file: path,
            rotated: new,
            answers: [HTTPResponse(status: 400, headers: ["content-type": "application/json"], body: Array(#"{"error":"invalid_grant"}"#.utf8)), bearerTokens]
        )
        let plain = ClientAuthenticator(clientID: "svc", method: .none, secret: nil, signingKey: nil)
        let subject = WorkloadField(name: "subject_token", file: WorkloadTokenFile(path: path, field: "subject_token_file", provider: "corp"))
        _ = try await TokenEndpoint(provider: "corp", client: plain, transport: exchange, policy: HTTPRequestPolicy()).requestTokens(
            at: url,
            TokenExchangeGrant.signInFields(subjectTokenType: TokenExchangePolicy.jwt, scopes: [], audience: nil, resource: nil),
            purpose: .workloadSignIn(subject.file),
            requestedScopes: [],
            workload: subject,
            now: Date()
        )
        #expect(exchange.sent.map { $0["subject_token"] } == [old, new])
        #expect(exchange.sent.allSatisfy { $0["subject_token_type"] == TokenExchangePolicy.jwt && $0["client_assertion"] == nil })
    }

    @Test(
        "a token_exchange session signs in again once the platform has rotated its file (looked at every few seconds), not before; other sessions are not watched"
    )
    func signedInAgainAfterRotation() async throws {
        let clock = ManualClock()
        let provider = PlatformProvider(clock: clock)
        let sessions = SessionManager(
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
            refreshLimits: .standard,
            now: { clock.now },
            random: { clock.random }
        )
        let key = SessionKey(uid: 1000, provider: ProviderID("svc")!, name: .default)
        let binding = SessionBinding(client: provider, policy: RefreshPolicy(), storage: .memory)
        _ = await sessions.store(
            try await provider.signInAsService(.tokenExchange, TokenVariant(), proofKey: nil),
            grant: .tokenExchange,
            binding: binding,
            for: key
        )
        let other = SessionKey(uid: 1000, provider: ProviderID("svc")!, name: SessionName("cc")!)
        _ = await sessions.store(
            try await provider.signInAsService(.clientCredentials, TokenVariant(), proofKey: nil),
            grant: .clientCredentials,
            binding: binding,
            for: other
        )
        #expect(await sessions.secondsUntilNextPlan() ?? .infinity <= 5, "the scheduler wakes to look at the file")

        #expect(await sessions.refreshDue() == 0, "the file has not changed")
        provider.rotate()
        #expect(await sessions.refreshDue() == 0, "looked at again only after the interval")
        clock.advance(by: 6)
        #expect(await sessions.refreshDue() == 1, "rotated: the token_exchange session, not the client_credentials one")
        await sessions.waitForRefreshes()
        #expect(await provider.serviceSignIns == 3)
        #expect(try await sessions.token(for: key, minimumValidity: 0, forceRefresh: false).accessToken.exposedValue == "exchanged-3")
        clock.advance(by: 6)
        #expect(await sessions.refreshDue() == 0, "the new file is the one the session has")
    }

    @Test("provider files: each workload key with its grant or client_auth, absolute paths, one assertion source, a known subject_token_type")
    func configuration() throws {
        func problems(_ extra: String, grants: String = #"["client_credentials"]"#) throws -> [String] {
            let document = #"{"type": "oauth2", "endpoints": {"token": "https://idp.example.test/token"}, "client_id": "svc", "grants": \#(grants)\#(extra)}"#
            let report = ProviderConfigurationLoader.parse(Data(document.utf8), id: "svc", file: "svc.json")
            guard case .invalid(let found) = report.outcome else { return [] }
            return found.map { "\($0.path): \($0.message)" }
        }
        #expect(try problems(#", "client_auth": "client_assertion_file", "client_assertion_file": "/run/token""#).isEmpty)
        #expect(try problems(#", "client_assertion_file": "/run/token""#).isEmpty, "client_auth follows the file")
        #expect(try problems(#", "client_auth": "client_assertion_file""#).contains { $0.hasPrefix("$.client_assertion_file: required") })
        #expect(try problems(#", "client_assertion_file": "run/token""#).contains { $0.contains("must be an absolute path") })
        #expect(try problems(#", "assertion_file": "/run/token""#, grants: #"["jwt_bearer"]"#).isEmpty)
        #expect(try problems("", grants: #"["jwt_bearer"]"#).contains { $0.hasPrefix("$.grants: jwt_bearer needs assertion_file") })
        #expect(
            try problems(#", "assertion_file": "/run/token", "assertion_key_file": "/etc/k.pem""#, grants: #"["jwt_bearer"]"#).contains {
                $0.contains("not both")
            }
        )
        #expect(try problems(#", "assertion_subject": "me""#, grants: #"["jwt_bearer"]"#).contains { $0.contains("applies only with assertion_key_file") })
        #expect(try problems(#", "assertion_file": "/run/token""#).contains { $0.contains("which grants does not list") })
        #expect(try problems(#", "subject_token_file": "/run/token""#, grants: #"["token_exchange"]"#).isEmpty)
        #expect(try problems("", grants: #"["token_exchange"]"#).contains { $0.hasPrefix("$.grants: token_exchange needs subject_token_file") })
        #expect(
            try problems(#", "subject_token_file": "/run/token", "subject_token_type": "saml""#, grants: #"["token_exchange"]"#).contains {
                $0.hasPrefix("$.subject_token_type: must be one of")
            }
        )
    }
}
