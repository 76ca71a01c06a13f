import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import NIOCore
import Testing

@testable import AuthGateDaemon
@testable import AuthGateServer

#if canImport(Glibc)
import Glibc
#endif

private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// The answer to a plain `token` call from the event loop (CachedTokenAnswers): what it
/// accepts, that it answers exactly as the dispatcher would, and that it never outlives what
/// the session manager holds.
@Suite("Cached token answers")
struct CachedTokenTests {
    // MARK: The scanner

    func scan(_ line: String) -> PlainTokenRequest? {
        Array(line.utf8).withUnsafeBytes { PlainTokenRequest($0) }
    }

    @Test("a host routes to the one provider that lists it for the tool; the scheme's default port is the same as none")
    func credentialRoutes() {
        let routes = CredentialRoutes.routes([
            claim("corp", ["Git.Example.com:443", "registry.example.com:5000"]),
            claim("gitonly", ["forge.example.com"], tools: ["git"]),
            claim("twice", ["twice.example.com", "twice.example.com:443"]),
            claim("bearer", ["bearer.example.com"], authType: .bearer),
        ])
        #expect(route(routes, "git.example.com") == "corp")
        #expect(route(routes, "GIT.example.com:443", "docker") == "corp")
        #expect(route(routes, "registry.example.com:5000") == "corp")
        #expect(route(routes, "registry.example.com") == nil, "another port is another server")
        #expect(route(routes, "git.example.com:8443") == nil)
        #expect(route(routes, "forge.example.com") == "gitonly")
        #expect(route(routes, "forge.example.com", "docker") == nil, "not listed for docker")
        #expect(route(routes, "forge.example.com", "svn") == nil)
        #expect(route(routes, "twice.example.com:443") == "twice", "one provider listing a host twice is still one provider")
        #expect(route(routes, "not a host") == nil)
        #expect(routes[CredentialRoutes.Key(tool: "git", host: "git.example.com")] == CredentialRoutes.Route(provider: "corp", username: "u-corp"))
        #expect(
            routes[CredentialRoutes.Key(tool: "git", host: "bearer.example.com")]
                == CredentialRoutes.Route(provider: "bearer", username: "u-bearer", authtype: "bearer")
        )
    }

    @Test("a host two providers list, or one of a provider not open to everyone or with paths, has no route")
    func credentialRoutesLeftToTheDispatcher() {
        let routes = CredentialRoutes.routes([
            claim("a", ["shared.example.com", "a.example.com"]),
            claim("b", ["shared.example.com:443", "b.example.com"]),
            claim("ruled", ["ruled.example.com", "mixed.example.com"], open: false),
            claim("open", ["mixed.example.com"]),
            claim("org", ["forge.example.com"], paths: ["org-a/"]),
        ])
        #expect(route(routes, "shared.example.com") == nil)
        #expect(route(routes, "a.example.com") == "a" && route(routes, "b.example.com") == "b")
        #expect(route(routes, "ruled.example.com") == nil)
        #expect(route(routes, "mixed.example.com") == nil, "the dispatcher may choose the ruled provider for callers it admits")
        #expect(route(routes, "forge.example.com") == nil, "a provider with paths answers by the path, which the plain line has not")
    }

    @Test("credential.get is answered from a published token with the dispatcher's bytes, and handed on whenever the choice is not plain")
    func credentialAnswers() async throws {
        let clock = ManualClock()
        let broadcast = SessionBroadcast(now: { [clock] in clock.now })
        let sessions = SessionManager(logger: quiet, observer: broadcast, now: { [clock] in clock.now }, random: { [clock] in clock.random })
        func provider(_ id: String, hosts: [String], access: String = "") -> RegisteredProvider {
            let helper = #","credential_helper":{"hosts":[\#(hosts.map { "\"\($0)\"" }.joined(separator: ","))],"username":"me-\#(id)"}"#
            return mockProvider(id: id, access: helper + access, now: { [clock] in clock.now })
        }
        let registered = provider("mock", hosts: ["git.example.com"])
        let client = try #require(registered.client)
        let providers = [
            registered, provider("one", hosts: ["shared.example.com"]), provider("two", hosts: ["shared.example.com"]),
            provider("ruled", hosts: ["ruled.example.com"], access: #","access":{"users":["root"]}"#),
        ]
        #expect(providers.allSatisfy { $0.configuration != nil })
        let answers = answers(broadcast, open: providers)
        _ = await sessions.store(
            try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1"))),
            grant: .password,
            binding: SessionBinding(client: client, policy: RefreshPolicy(), storage: .memory),
            for: key
        )
        let handedOut = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        // Every provider's session has that token published, so only the route decides.
        for id in ["one", "two", "ruled"] {
            broadcast.published.publish(handedOut, obtainedAt: clock.now, for: SessionKey(uid: 1000, provider: ProviderID(id)!, name: .default))
        }
        func line(_ host: String, tool: String = "git", minimumValidity: Int = 30, extra: String = "") -> ByteBuffer {
            ByteBuffer(
                string:
                    #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"\#(host)","min_valid_seconds":\#(minimumValidity),\#(extra)"tool":"\#(tool)"}}"#
            )
        }
        func answer(_ line: ByteBuffer, uid: UInt32 = 1000) -> String? {
            answers.answer(to: line, uid: uid, allocator: ByteBufferAllocator()).map { String(buffer: $0) }
        }

        let bearer = CredentialRoutes.Route(provider: "b", username: "me-b", authtype: "bearer").result(token: Array(#"{"t":1}"#.utf8))
        #expect(
            String(decoding: bearer, as: UTF8.self)
                == String(
                    decoding: try RPCCoding.makeEncoder().encode(CredentialResult(provider: "b", username: "me-b", authtype: "bearer", token: nil)),
                    as: UTF8.self
                )
                .replacingOccurrences(of: #""username""#, with: #""token":{"t":1},"username""#),
            "a bearer provider's answer is the dispatcher's too"
        )
        let dispatcherResult = try RPCCoding.makeEncoder().encode(CredentialResult(provider: "mock", username: "me-mock", token: TokenResult(handedOut)))
        let expected = #"{"id":1,"jsonrpc":"2.0","result":"# + String(decoding: dispatcherResult, as: UTF8.self) + "}\n"
        #expect(answer(line("git.example.com")) == expected, "the dispatcher's bytes")
        #expect(answer(line("Git.Example.com:443", tool: "docker")) == expected)

        #expect(answer(line("unknown.example.com")) == nil, "no provider lists it")
        #expect(answer(line("git.example.com:8443")) == nil)
        #expect(answer(line("shared.example.com")) == nil, "two providers list it")
        #expect(answer(line("ruled.example.com")) == nil, "a provider with access rules is decided per caller")
        #expect(answer(line("git.example.com", tool: "svn")) == nil)
        #expect(answer(line("git.example.com", extra: #""path":"org/repo","#)) == nil, "another member")
        #expect(answer(line("git.example.com", extra: #""username":"me","#)) == nil)
        #expect(answer(line("git.example.com"), uid: 1001) == nil, "another uid has no session")
        #expect(answer(line("git.example.com", minimumValidity: 60)) == nil, "60 s is all the token lives: the manager decides")
        clock.advance(by: 35)
        #expect(answer(line("git.example.com")) == nil, "25 s left is less than the 30 asked")
        #expect(answer(line("git.example.com", minimumValidity: 20)) != nil)
    }

    // MARK: Published tokens follow the session manager

    let key = SessionKey(uid: 1000, provider: ProviderID("mock")!, name: .default)

    func plainLine(minimumValidity: Int? = nil) -> ByteBuffer {
        let extra = minimumValidity.map { #","min_valid_seconds":\#($0)"# } ?? ""
        return ByteBuffer(string: #"{"jsonrpc":"2.0","id":9,"method":"token","params":{"provider":"mock"\#(extra)}}"#)
    }

    func answers(_ broadcast: SessionBroadcast, open: [RegisteredProvider]) -> CachedTokenAnswers {
        let providers = OpenProviders()
        providers.update(open)
        return CachedTokenAnswers(tokens: broadcast.published, providers: providers)
    }

    func mockProvider(id: String = "mock", access: String = "", now: @escaping @Sendable () -> Date = { Date() }) -> RegisteredProvider {
        let json = #"{"type":"mock","users":[{"username":"u","password":"p-password-1"}],"access_token_lifetime_seconds":60\#(access)}"#
        return RegisteredProvider.make(ProviderConfigurationLoader.parse(Data(json.utf8), id: id, file: "\(id).json"), now: now, logger: quiet)
    }

    @Test("a token is answered from the event loop only once the manager has handed it out, and only while it is current")
    func followsTheManager() async throws {
        let clock = ManualClock()
        let broadcast = SessionBroadcast(now: { [clock] in clock.now })
        let sessions = SessionManager(logger: quiet, observer: broadcast, now: { [clock] in clock.now }, random: { [clock] in clock.random })
        let registered = mockProvider(now: { [clock] in clock.now })
        let client = try #require(registered.client)
        let answers = answers(broadcast, open: [registered])
        func answer(_ line: ByteBuffer, uid: UInt32 = 1000) -> [String: Any]? {
            guard let buffer = answers.answer(to: line, uid: uid, allocator: ByteBufferAllocator()) else { return nil }
            let text = String(buffer: buffer)
            #expect(text.hasSuffix("}\n") && text.hasPrefix(#"{"id":9,"jsonrpc":"2.0","result":"#))
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        }
        func accessToken(_ reply: [String: Any]?) -> String? { (reply?["result"] as? [String: Any])?["access_token"] as? String }

        let signIn = try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1")))
        _ = await sessions.store(signIn, grant: .password, binding: SessionBinding(client: client, policy: RefreshPolicy(), storage: .memory), for: key)
        #expect(answer(plainLine()) == nil, "nothing is published before the manager hands the token out")

        let handedOut = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        let reply = try #require(answer(plainLine()))
        #expect(accessToken(reply) == handedOut.accessToken.exposedValue)
        // The result is the dispatcher's encoding of the same TokenResult, byte for byte.
        let dispatcherResult = try RPCCoding.makeEncoder().encode(TokenResult(handedOut))
        let fromCache = String(buffer: try #require(answers.answer(to: plainLine(), uid: 1000, allocator: ByteBufferAllocator())))
        #expect(fromCache == #"{"id":9,"jsonrpc":"2.0","result":"# + String(decoding: dispatcherResult, as: UTF8.self) + "}\n")
        #expect(!fromCache.contains("refresh"), "never the refresh token")
        #expect(answer(plainLine(), uid: 1001) == nil, "another uid has no session")

        // Validity is checked on every call, against the manager's clock.
        #expect(answer(plainLine(minimumValidity: 59)) != nil)
        #expect(answer(plainLine(minimumValidity: 60)) == nil)
        clock.advance(by: 55)
        #expect(answer(plainLine()) == nil, "5 s left is less than the default 10")
        #expect(answer(plainLine(minimumValidity: 4)) != nil)

        // A refresh withdraws the old token at once; the next hand-out publishes the new one.
        let refreshed = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        #expect(refreshed.accessToken != handedOut.accessToken)
        #expect(answer(plainLine(minimumValidity: 0)) == nil, "refreshed, not handed out from the cache yet")
        _ = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        #expect(accessToken(answer(plainLine())) == refreshed.accessToken.exposedValue)

        // Signing out withdraws it.
        _ = await sessions.remove(key)
        #expect(answer(plainLine(minimumValidity: 0)) == nil)
        #expect(broadcast.published.count == 0)
    }

    @Test("the front door's remembered answers are given again only while nothing changed and the token is valid enough")
    func recentAnswers() async throws {
        let clock = ManualClock()
        let broadcast = SessionBroadcast(now: { [clock] in clock.now })
        let sessions = SessionManager(logger: quiet, observer: broadcast, now: { [clock] in clock.now }, random: { [clock] in clock.random })
        let registered = mockProvider(now: { [clock] in clock.now })
        let client = try #require(registered.client)
        let providers = OpenProviders()
        providers.update([registered])
        let answers = CachedTokenAnswers(tokens: broadcast.published, providers: providers)
        var recent = RecentTokenAnswers()
        func answer(_ line: ByteBuffer, uid: UInt32 = 1000) -> String? {
            line.withUnsafeReadableBytes { bytes in recent.withAnswer(to: bytes, uid: uid, from: answers) { String(decoding: $0, as: UTF8.self) }?.result }
        }
        func accessToken(_ line: String?) -> String? {
            let reply = line.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) } as? [String: Any]
            return (reply?["result"] as? [String: Any])?["access_token"] as? String
        }
        let binding = SessionBinding(client: client, policy: RefreshPolicy(), storage: .memory)
        _ = await sessions.store(
            try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1"))),
            grant: .password,
            binding: binding,
            for: key
        )
        let handedOut = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)

        let first = try #require(answer(plainLine()))
        #expect(accessToken(first) == handedOut.accessToken.exposedValue)
        let counted = broadcast.published.answerCount
        #expect(answer(plainLine()) == first, "the same line again: the same bytes")
        #expect(broadcast.published.answerCount == counted + 1, "and counted as an answer")
        #expect(answer(plainLine(), uid: 1001) == nil, "never another uid's answer")

        // Validity: judged at every call against the requested minimum.
        #expect(answer(plainLine(minimumValidity: 30)) != nil)
        clock.advance(by: 35)
        #expect(answer(plainLine(minimumValidity: 30)) == nil, "25 s left is less than 30, remembered or not")
        #expect(answer(plainLine()) != nil, "25 s is more than the default 10")

        // Any publication or withdrawal ends what was remembered.
        _ = try await sessions.token(for: key, minimumValidity: 0, forceRefresh: true)
        #expect(answer(plainLine()) == nil, "refreshed: the old answer is forgotten, the new token not handed out yet")
        let refreshed = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        #expect(accessToken(answer(plainLine())) == refreshed.accessToken.exposedValue)
        #expect(accessToken(answer(plainLine())) == refreshed.accessToken.exposedValue)

        // So does any change of the providers: one with access rules is decided per caller.
        providers.update([mockProvider(access: #","access":{"users":["root"]}"#)])
        #expect(answer(plainLine()) == nil)
        providers.update([registered])
        #expect(answer(plainLine()) != nil)
        _ = await sessions.remove(key)
        #expect(answer(plainLine()) == nil, "signed out")

        // More lines in use than it remembers: each is still answered right.
        _ = await sessions.store(
            try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1"))),
            grant: .password,
            binding: binding,
            for: key
        )
        let current = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        for round in 0..<2 {
            for validity in 0..<(RecentTokenAnswers.capacity + 4) {
                #expect(accessToken(answer(plainLine(minimumValidity: validity))) == current.accessToken.exposedValue, "round \(round), \(validity)")
            }
        }
    }

    @Test(
        "a minimum the 60 s tokens cannot meet is served a token younger than half its lifetime, by the manager and the event loop alike, and logged once"
    )
    func unmeetableMinimum() async throws {
        let clock = ManualClock()
        let log = SharedText()
        let logger = Logger(label: "test") { _ in RecordingLogHandler(log) }
        let broadcast = SessionBroadcast(now: { [clock] in clock.now })
        let sessions = SessionManager(logger: logger, observer: broadcast, now: { [clock] in clock.now }, random: { [clock] in clock.random })
        let registered = mockProvider(now: { [clock] in clock.now })  // 60 s tokens
        let client = try #require(registered.client)
        let answers = answers(broadcast, open: [registered])
        func fastPath(_ minimum: Int) -> String? {
            guard let buffer = answers.answer(to: plainLine(minimumValidity: minimum), uid: 1000, allocator: ByteBufferAllocator()) else { return nil }
            let reply = try? JSONSerialization.jsonObject(with: Data(String(buffer: buffer).utf8)) as? [String: Any]
            return (reply?["result"] as? [String: Any])?["access_token"] as? String
        }
        let binding = SessionBinding(client: client, policy: RefreshPolicy(), storage: .memory)
        _ = await sessions.store(
            try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1"))),
            grant: .password,
            binding: binding,
            for: key
        )
        let caller = PeerCredentials(pid: getpid(), uid: 1000, gid: 1000)
        let signedIn = try await sessions.token(for: key, minimumValidity: 0, forceRefresh: false).accessToken.exposedValue
        // The sign-in's token has under 60 s left: refreshed once, and the new one has no more.
        let first = try await sessions.token(for: key, minimumValidity: 60, forceRefresh: false, caller: caller).accessToken.exposedValue
        #expect(first != signedIn)
        #expect(fastPath(60) == nil, "refreshed, not handed out from the cache yet")
        #expect(
            try await sessions.token(for: key, minimumValidity: 60, forceRefresh: false, caller: caller).accessToken.exposedValue == first,
            "no refresh per call"
        )
        #expect(fastPath(60) == first, "the event loop serves the noted minimum as the manager does")
        #expect(fastPath(90) == nil, "a minimum not yet noted goes to the manager")
        #expect(log.text.components(separatedBy: "minimum validity the provider's tokens do not have").count == 2, "logged once: \(log.text)")
        #expect(log.text.contains(#""token.min_valid_seconds": 60"#) && log.text.contains(#""token.lifetime_seconds": 60"#), "\(log.text)")

        clock.advance(by: 29)  // 31 s left: more than half of 60
        #expect(fastPath(60) == first)
        #expect(try await sessions.token(for: key, minimumValidity: 60, forceRefresh: false).accessToken.exposedValue == first)
        clock.advance(by: 2)  // 29 s left
        #expect(fastPath(60) == nil, "older than half its lifetime: the manager refreshes")
        let second = try await sessions.token(for: key, minimumValidity: 60, forceRefresh: false).accessToken.exposedValue
        #expect(second != first)
        #expect(fastPath(60) == nil, "refreshed, not handed out from the cache yet")
        #expect(try await sessions.token(for: key, minimumValidity: 60, forceRefresh: false).accessToken.exposedValue == second)
        #expect(fastPath(60) == second)
        // An attainable minimum is held exactly: 59 s of a 60 s token.
        clock.advance(by: 2)
        #expect(fastPath(59) == nil)
        #expect(log.text.components(separatedBy: "minimum validity the provider's tokens do not have").count == 2, "still once: \(log.text)")
    }

    @Test("a new sign-in replacing the session withdraws the old token")
    func replacedSession() async throws {
        // One clock for all: on the wall clock, a test process whose threads other tests block
        // ran this for 96 s, and the 60 s token expired between two lines.
        let clock = ManualClock()
        let broadcast = SessionBroadcast(now: { [clock] in clock.now })
        let sessions = SessionManager(logger: quiet, observer: broadcast, now: { [clock] in clock.now })
        let registered = mockProvider(now: { [clock] in clock.now })
        let client = try #require(registered.client)
        let answers = answers(broadcast, open: [registered])
        let binding = SessionBinding(client: client, policy: RefreshPolicy(), storage: .memory)
        _ = await sessions.store(
            try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1"))),
            grant: .password,
            binding: binding,
            for: key
        )
        _ = try await sessions.token(for: key, minimumValidity: 10, forceRefresh: false)
        #expect(answers.answer(to: plainLine(), uid: 1000, allocator: ByteBufferAllocator()) != nil)
        _ = await sessions.store(
            try await client.signIn(PasswordCredentials(username: "u", password: Secret("p-password-1"))),
            grant: .password,
            binding: binding,
            for: key
        )
        #expect(answers.answer(to: plainLine(), uid: 1000, allocator: ByteBufferAllocator()) == nil)
    }

    @Test("providers with access rules, and unusable ones, are always left to the registry")
    func openProviders() {
        let open = OpenProviders()
        let ruled = mockProvider(id: "ruled", access: #","access":{"users":["root"]}"#)
        #expect(ruled.configuration != nil, "the access rule itself is valid")
        let broken = RegisteredProvider.make(
            ProviderConfigurationLoader.parse(Data(#"{"type":"mock","latency":1}"#.utf8), id: "broken", file: "broken.json"),
            logger: quiet
        )
        #expect(broken.status == .invalid)
        open.update([mockProvider(), ruled, broken])
        #expect(open.contains("mock"))
        #expect(!open.contains("ruled"), "a provider with access rules is decided per caller")
        #expect(!open.contains("broken"))
        open.update([ruled])
        #expect(!open.contains("mock"), "a provider gone from the registry is gone from the set")
    }

}
