import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// The Swift client library against the real daemon.
@Suite("AuthGateClient")
struct AuthGateClientTests {
    @Test("token, providers, status and tokenRejected; errors carry the daemon's reason; an absent daemon says so")
    func calls() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let client = AuthGateClient(socketPath: daemon.socketPath)
        let token = try await client.token(provider: "mock", minimumValidity: 60)
        #expect(token.accessToken.exposedValue.hasPrefix("mock_at_") && token.tokenType == "Bearer")
        #expect(try await client.providers().map(\.id) == ["mock"])
        #expect(try await client.status().map(\.provider) == ["mock"])
        let replaced = try await client.tokenRejected(provider: "mock", accessToken: token.accessToken)
        #expect(replaced.accessToken != token.accessToken)
        do {
            _ = try await client.token(provider: "mock", session: "never")
            Issue.record("a session nobody signed in to has no token")
        } catch {
            #expect(error.reason == .loginRequired && !error.isDaemonUnreachable)
        }
        do {
            _ = try await AuthGateClient(socketPath: daemon.scratch.path + "/nothing.sock").providers()
            Issue.record("nothing listens there")
        } catch {
            #expect(error.isDaemonUnreachable && error.reason == nil)
        }
    }

    @Test("watch: the token at once, a new one after each refresh, the session's end; a refused watch throws its reason; stopping closes the connection")
    func watch() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "debug")
        try daemon.signIn()
        let client = AuthGateClient(socketPath: daemon.scratch.path + "/s.sock")
        var events = client.watch(provider: "mock", minimumValidity: 0).makeAsyncIterator()
        guard case .token(let first)? = try await events.next() else { throw TestFailure("no first token") }
        #expect(first.accessToken == (try await client.token(provider: "mock")).accessToken)
        let rejected = try await client.tokenRejected(provider: "mock", accessToken: first.accessToken)
        guard case .token(let changed)? = try await events.next() else { throw TestFailure("no new token") }
        #expect(changed.accessToken == rejected.accessToken && changed.accessToken != first.accessToken)
        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        guard case .ended(let ended)? = try await events.next() else { throw TestFailure("no end") }
        #expect(ended.reason == .loggedOut)

        do {
            for try await _ in client.watch(provider: "nowhere") {}
            Issue.record("an unknown provider cannot be watched")
        } catch let error as AuthGateClientError {
            #expect(error.reason == .unknownProvider)
        }

        // A consumer that stops while the watch waits for news: its blocked read is interrupted
        // and the sequence ends.
        try daemon.signIn()
        let watching = Task {
            for try await _ in client.watch(provider: "mock") {}
        }
        try await until { daemon.logText.components(separatedBy: "token watch started").count - 1 == 2 }
        watching.cancel()
        #expect(await result(of: watching) != nil, "the cancelled watch ends")
    }

    @Test(
        "follow: the token, then across a daemon restart — reconnected, the missing session reported as unavailable and waited for — the new daemon's token once someone signs in; cancelling stops it"
    )
    func follow() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "debug")
        try daemon.signIn()
        let client = AuthGateClient(socketPath: daemon.socketPath)
        let following = client.follow(provider: "mock")
        var events = following.makeAsyncIterator()
        guard case .token(let first)? = try await events.next() else { throw TestFailure("no first token") }

        daemon.send(SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        let restarted = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "debug", scratch: daemon.scratch)
        guard case .unavailable(let reason, _)? = try await events.next() else { throw TestFailure("the missing session was not reported") }
        #expect(reason == .loginRequired, "the new daemon has no session yet (memory storage)")
        // The follower now waits for a sign-in (wait_for_sign_in), with no polling.
        try restarted.signIn()
        guard case .token(let second)? = try await events.next() else { throw TestFailure("no token after the sign-in") }
        let current = try await client.token(provider: "mock")
        #expect(second.accessToken != first.accessToken && second.accessToken == current.accessToken)

        // A consumer that stops while the follower waits for news: it ends.
        let stopping = Task {
            for try await _ in client.follow(provider: "mock") {}
        }
        try await until { restarted.logText.components(separatedBy: "token watch started").count - 1 >= 2 }
        stopping.cancel()
        #expect(await result(of: stopping) != nil, "the cancelled follower ends")

        do {
            for try await _ in client.follow(provider: "nowhere") {}
            Issue.record("an unknown provider cannot be followed")
        } catch let error as AuthGateClientError {
            #expect(error.reason == .unknownProvider, "waiting would not help: thrown")
        }
    }

    @Test("watch with waitForSignIn: started before the sign-in, it is pushed the sign-in's token at once")
    func watchWaitsForTheSignIn() async throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "debug")
        let client = AuthGateClient(socketPath: daemon.socketPath)
        let first = Task { () -> (TokenResult, ContinuousClock.Instant)? in
            for try await event in client.watch(provider: "mock", minimumValidity: 0, waitForSignIn: true) {
                if case .token(let token) = event { return (token, .now) }
            }
            return nil
        }
        // The watch waits in the daemon: its connection is open beside this metrics call's (a
        // refused watch would have closed it and ended the task).
        func openConnections() throws -> Double? {
            try daemon.cli(["metrics"]).stdout.split(separator: "\n").first { $0.hasPrefix("authgate_connections_open ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        try await until { try openConnections() == 2 }
        try daemon.signIn()
        let signedIn = ContinuousClock.now
        let answered = try #require(await result(of: first, timeout: .seconds(10))?.get())
        #expect(answered.0.accessToken == (try await client.token(provider: "mock")).accessToken)
        // Pushed when the session is published (the daemon polls nothing). The bound leaves
        // room for a loaded machine: 2.7 s was seen with four test processes on two cores.
        #expect(answered.1 - signedIn < .seconds(5), "seen \(answered.1 - signedIn) after the sign-in")
    }

    @Test(
        "against idpyoidc: authorizationHeaders (Bearer, and DPoP with a proof the resource takes), exchange (cached; a forbidden audience is validation_failed), and HTTPAuthorizer answering a resource's use_dpop_nonce with one retry, the nonce then remembered"
    )
    func authorizationAndExchange() async throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.idpy(workdir: scratch.path + "/idp")
        func provider(_ client: String, _ extra: String) -> String {
            #"{"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "\#(client)", "grants": ["password"], "scopes": ["openid", "read"], "tls": {"ca_file": "\#(server.caFile)"}\#(extra)}"#
        }
        let secretFile = server.client("authgate-exchange")["secret_file"] as? String ?? ""
        let daemon = try DaemonProcess(
            providers: [
                "corp.json": provider("authgate-exchange", #", "client_secret_file": "\#(secretFile)""#),
                "bound.json": provider("authgate-dpop", #", "dpop": "required""#),
            ],
            scratch: scratch
        )
        try daemon.waitForLog("provider ready")
        for name in ["corp", "bound"] {
            let login = try daemon.cli(["login", name, "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
            #expect(login.status == 0, "\(login.stderr)")
        }
        let client = AuthGateClient(socketPath: daemon.socketPath)
        let resource = try #require(server.endpoints["resource"])
        func lines(_ headers: [(name: String, value: String)]) -> [String] { headers.map { "\($0.name): \($0.value)" } }

        let bearer = try await client.authorizationHeaders(provider: "corp", method: "GET", url: resource)
        let own = try await client.token(provider: "corp").accessToken
        #expect(bearer.map(\.name) == ["Authorization"] && bearer.first?.value == "Bearer \(own.exposedValue)")
        #expect(try server.resource(lines(bearer)).status == "200")

        let bound = try await client.authorizationHeaders(provider: "bound", method: "GET", url: resource)
        let boundToken = try await client.token(provider: "bound")
        #expect(boundToken.tokenType == "DPoP" && bound.map(\.name) == ["Authorization", "DPoP"])
        #expect(bound.first?.value == "DPoP \(boundToken.accessToken.exposedValue)")
        #expect(try server.resource(lines(bound)).status == "200", "the daemon's proof, for this method and URL")
        let elsewhere = try await client.authorizationHeaders(provider: "bound", method: "POST", url: resource)
        #expect(try server.resource(lines(elsewhere)).status == "401", "a proof of another method is refused")

        let exchanged = try await client.exchange(provider: "corp", audience: "https://api.example.test")
        #expect(exchanged.accessToken != own && exchanged.issuedTokenType == "urn:ietf:params:oauth:token-type:access_token")
        #expect(try server.resource(["Authorization: Bearer \(exchanged.accessToken.exposedValue)"]).status == "200")
        let requests = try server.idpyStats()["token_requests"] as? Int ?? -1
        #expect(try await client.exchange(provider: "corp", audience: "https://api.example.test").accessToken == exchanged.accessToken)
        #expect(try server.idpyStats()["token_requests"] as? Int == requests, "cached per combination")
        do {
            _ = try await client.exchange(provider: "corp", audience: "https://forbidden.example.test")
            Issue.record("the server refuses that audience")
        } catch {
            #expect(error.reason == .validationFailed && error.message.contains("audience"), "\(error)")
        }

        // A resource that wants its nonce in the proof: one challenge, one retry, the token kept.
        try server.setIdpyMode("resource-nonce")
        let authorizer = HTTPAuthorizer(client: client, provider: "bound")
        func get() async throws -> Int {
            try await authorizer.send(method: "GET", url: resource) { authorized in
                let answer = try Self.curl(authorized, caFile: server.caFile)
                return (answer.status, answer)
            }
        }
        let before = try server.idpyStats()
        #expect(try await get() == 200)
        var stats = try server.idpyStats()
        #expect(stats["nonce_challenges"] as? Int == (before["nonce_challenges"] as? Int ?? 0) + 1)
        #expect(stats["resource_requests"] as? Int == (before["resource_requests"] as? Int ?? 0) + 2)
        #expect(try await get() == 200)
        stats = try server.idpyStats()
        #expect(stats["nonce_challenges"] as? Int == (before["nonce_challenges"] as? Int ?? 0) + 1, "the nonce was remembered")
        #expect(stats["resource_requests"] as? Int == (before["resource_requests"] as? Int ?? 0) + 3)
        #expect(stats["token_requests"] as? Int == before["token_requests"] as? Int, "a nonce is no reason to refresh")
        let unchanged = try await client.token(provider: "bound").accessToken
        #expect(unchanged == boundToken.accessToken)
        for secret in [own, exchanged.accessToken, boundToken.accessToken] {
            #expect(!daemon.logText.contains(secret.exposedValue))
        }
    }

    /// Sends an authorized GET with curl (the headers on its stdin, not in argv): the answer's
    /// status and header fields.
    static func curl(_ request: AuthorizedRequest, caFile: String) throws -> HTTPAnswer {
        let headers = request.headers.map { "\($0.name): \($0.value)\n" }.joined()
        let result = try run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sS", "--cacert", caFile, "-o", "/dev/null", "-D", "-", "-H", "@-", request.url],
            stdin: headers
        )
        let lines = result.stdout.components(separatedBy: "\r\n")
        guard let status = lines.first?.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else {
            throw TestFailure("curl: \(result.stderr)")
        }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HTTPAnswer(status: status, headers: fields)
    }
}
