import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The cached answers through the built daemon's socket (CachedTokenTests holds their rules,
/// in process).
@Suite("Cached token answers through the socket")
struct CachedTokenSocketTests {
    @Test("through the socket: the cached answer is the dispatcher's line, keeps request order, and ends with the session")
    func throughTheSocket() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.slowMock(100), "short.json": Providers.shortLivedMock(30)])
        let connection = try daemon.connect()
        let login = #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#
        _ = try exchange(connection, login)
        // The first call goes through the dispatcher and publishes; the second is answered from
        // the cache; the third is the same request spelt with an escape, which only the full
        // decoder reads. All three lines must be identical.
        // daemon.info counts the answers given on the event loop (shown to root, an administrator).
        func cachedAnswers() throws -> Int? {
            (try exchange(daemon.connect(), #"{"jsonrpc":"2.0","id":0,"method":"daemon.info"}"#).result as? [String: Any])?["cached_token_answers"] as? Int
        }
        let plain = #"{"jsonrpc":"2.0","id":5,"method":"token","params":{"provider":"mock"}}"#
        #expect(try cachedAnswers() == 0)
        let viaDispatcher = try connection.callRaw(plain)
        #expect(try cachedAnswers() == 0, "the first call goes through the dispatcher, which publishes")
        let cached = try connection.callRaw(plain)
        #expect(try cachedAnswers() == 1, "the second is answered from the published token")
        let escaped = try connection.callRaw(#"{"jsonrpc":"2.0","id":5,"method":"token","params":{"provider":"\u006dock"}}"#)
        #expect(try cachedAnswers() == 1, "a spelling only the decoder reads goes through the dispatcher")
        #expect(viaDispatcher.contains("mock_at_"))
        #expect(cached == viaDispatcher)
        #expect(escaped == viaDispatcher)
        let stringID = try connection.callRaw(#"{"jsonrpc":"2.0","id":"x-1","method":"token","params":{"provider":"mock"}}"#)
        #expect(stringID == viaDispatcher.replacingOccurrences(of: #"{"id":5,"#, with: #"{"id":"x-1","#))
        #expect(try cachedAnswers() == 2)
        func accessToken(_ reply: [String: Any]) -> String? { (reply.result as? [String: Any])?["access_token"] as? String }
        let first = try #require(accessToken(try exchange(connection, plain)))

        // Pipelined: a cached token, a slow sign-in that replaces the session, then two tokens.
        // The answers come in order, and the tokens after the sign-in are the new session's.
        let pipelined = [
            #"{"jsonrpc":"2.0","id":10,"method":"token","params":{"provider":"mock"}}"#,
            login.replacingOccurrences(of: #""id":1"#, with: #""id":11"#),
            #"{"jsonrpc":"2.0","id":12,"method":"token","params":{"provider":"mock"}}"#,
            #"{"jsonrpc":"2.0","id":13,"method":"token","params":{"provider":"mock"}}"#,
        ]
        try connection.send(Array((pipelined.joined(separator: "\n") + "\n").utf8))
        let replies = try (0..<4).map { _ in try readReply(connection) }
        #expect(replies.map { $0["id"] as? Int } == [10, 11, 12, 13])
        #expect(accessToken(replies[0]) == first)
        let second = try #require(accessToken(replies[2]))
        #expect(second != first, "the sign-in replaced the session before the next token was answered")
        #expect(accessToken(replies[3]) == second)
        #expect(accessToken(try exchange(connection, plain)) == second)

        // Signed out on another connection: the cached token is gone for this one too.
        let other = try daemon.connect()
        #expect(
            (try exchange(other, #"{"jsonrpc":"2.0","id":20,"method":"logout","params":{"provider":"mock"}}"#).result as? [String: Any])?["removed"] as? Bool
                == true
        )
        #expect(try exchange(connection, plain).errorReason == "login_required")

        // A token that will not last long enough is refreshed, not served from the cache.
        _ = try exchange(connection, login.replacingOccurrences(of: #""mock""#, with: #""short""#))
        let short = #"{"jsonrpc":"2.0","id":30,"method":"token","params":{"provider":"short","min_valid_seconds":20}}"#
        let before = try #require(accessToken(try exchange(connection, short)))
        #expect(accessToken(try exchange(connection, short)) == before)
        let longer = try #require(accessToken(try exchange(connection, short.replacingOccurrences(of: ":20}", with: ":40}"))))
        #expect(longer != before)
        #expect(accessToken(try exchange(connection, short)) == longer, "the old token is not served after the refresh")
        #expect(!daemon.logText.contains(before) && !daemon.logText.contains(longer))
    }

    @Test(
        "through the socket: a reload that adds access rules or breaks the provider ends the cached answers at once (and the sessions of those it no longer admits)"
    )
    func reloadEndsCachedAnswers() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let connection = try daemon.connect()
        _ = try exchange(connection, #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#)
        let plain = #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"#
        #expect(try exchange(connection, plain).result != nil)
        #expect(try exchange(connection, plain).result != nil, "answered from the cache now")

        // Only `nobody` may use it now: the caller (not nobody) is refused, session or not.
        let restricted = Providers.mock.replacingOccurrences(of: #""type": "mock","#, with: #""type": "mock", "access": {"users": ["nobody"]},"#)
        #expect(restricted != Providers.mock)
        try Data(restricted.utf8).write(to: URL(fileURLWithPath: daemon.providersDirectory + "/mock.json"))
        #expect(try daemon.cli(["reload"]).status == 0)
        #expect(try exchange(connection, plain).errorReason == "permission_denied")

        // Back to open: the session did not survive the narrowing (a reload that drops a uid signs it out), so a sign-in
        // first; then an invalid file makes it unusable.
        try Data(Providers.mock.utf8).write(to: URL(fileURLWithPath: daemon.providersDirectory + "/mock.json"))
        #expect(try daemon.cli(["reload"]).status == 0)
        #expect(try exchange(connection, plain).errorReason == "login_required")
        _ = try exchange(connection, #"{"jsonrpc":"2.0","id":1,"method":"login","params":{"provider":"mock","username":"demo","password":"demo-password-1"}}"#)
        #expect(try exchange(connection, plain).result != nil)
        #expect(try exchange(connection, plain).result != nil)
        try Data(#"{"type": "mock", "latency": 1}"#.utf8).write(to: URL(fileURLWithPath: daemon.providersDirectory + "/mock.json"))
        _ = try daemon.cli(["reload"])
        #expect(try exchange(connection, plain).errorReason == "provider_unavailable")
    }
}
