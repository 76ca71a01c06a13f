import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

/// `token.watch` and the follower against a stand-in daemon: the answer, then notifications.
@Suite("Watching a session through the client")
struct ClientWatchTests {
    private static let changed =
        #"{"jsonrpc":"2.0","method":"token.changed","params":{"access_token":"at-2","expires_at":"2027-01-15T09:00:00Z","provider":"corp","scopes":[],"session":"default","token_type":"Bearer"}}"#
    private static let ended =
        #"{"jsonrpc":"2.0","method":"session.ended","params":{"message":"Signed out.","provider":"corp","reason":"logged_out","session":"default"}}"#
    /// A notification of a method this client does not know, and a broken token.changed: skipped.
    private static let skipped = [
        #"{"jsonrpc":"2.0","method":"daemon.mood","params":{}}"#, #"{"jsonrpc":"2.0","method":"token.changed","params":{"provider":"corp"}}"#,
    ]

    @Test("a watch gives the answer's token, then each token.changed and session.ended, skipping what it does not know")
    func watch() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            ([tokenAnswer(id, "at-1")] + Self.skipped + [Self.changed, Self.ended]).joined(separator: "\n")
        }
        var events: [String] = []
        for try await event in AuthGateClient(socketPath: daemon.path).watch(provider: "corp", waitForSignIn: true) {
            switch event {
            case .token(let token): events.append("token \(token.accessToken.exposedValue)")
            case .ended(let ended): events.append("ended \(ended.reason.rawValue)")
            }
            if events.count == 3 { break }
        }
        #expect(events == ["token at-1", "token at-2", "ended logged_out"])
        let request = try #require(daemon.requests.first)
        #expect(request.contains(#""method":"token.watch""#) && request.contains(#""wait_for_sign_in":true"#), "\(request)")
    }

    @Test("a refused watch throws the daemon's reason")
    func refusedWatch() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in errorAnswer(id, AuthGateError(.unknownProvider, "No provider named corp.")) }
        let error = await #expect(throws: AuthGateClientError.self) {
            for try await _ in AuthGateClient(socketPath: daemon.path).watch(provider: "corp") {}
        }
        #expect(error?.reason == .unknownProvider && error?.message == "No provider named corp.")
    }

    @Test("the follower waits for a sign-in (login_required, then a watch with wait_for_sign_in) and goes on with the token")
    func followerWaitsForASignIn() throws {
        let scratch = try ScratchDirectory()
        let calls = Shared(0)
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            calls.withLock { count in
                count += 1
                return count == 1 ? errorAnswer(id, AuthGateError(.loginRequired, "You are not signed in to corp.")) : tokenAnswer(id, "at-1")
            }
        }
        let notices = Shared<[String]>([])
        let follower = TokenFollower(socketPath: daemon.path, params: TokenParams(provider: "corp")) { notice in notices.withLock { $0.append(notice) } }
        var events: [String] = []
        try follower.run { event in
            switch event {
            case .token(let token): events.append("token \(token.accessToken.exposedValue)")
            case .ended(let ended): events.append("ended \(ended.reason.rawValue)")
            case .unavailable(let reason, _): events.append("unavailable \(reason.rawValue)")
            }
            return events.count < 2
        }
        #expect(events == ["unavailable login_required", "token at-1"])
        #expect(daemon.requests.count == 2)
        #expect(!daemon.requests[0].contains("wait_for_sign_in") && daemon.requests[1].contains(#""wait_for_sign_in":true"#), "\(daemon.requestText)")
        #expect(notices.withLock { $0 } == ["You are not signed in to corp. [login_required]; waiting for a sign-in."])
    }

    @Test("the follower run once throws the first refusal; a refusal waiting cannot mend is thrown at once")
    func followerThrows() throws {
        let scratch = try ScratchDirectory()
        let signedOut = try StandInDaemon(in: scratch.path) { _, id in errorAnswer(id, AuthGateError(.loginRequired, "Sign in.")) }
        do throws(RPCClientError) {
            try TokenFollower(socketPath: signedOut.path, params: TokenParams(provider: "corp")).run(once: true) { _ in true }
            Issue.record("a refusal was not thrown")
        } catch {
            guard case .remote(let remote) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(remote.reason == .loginRequired)
        }
        try FileManager.default.removeItem(atPath: signedOut.path)
        let unknown = try StandInDaemon(in: scratch.path) { _, id in errorAnswer(id, AuthGateError(.unknownProvider, "No provider named corp.")) }
        do throws(RPCClientError) {
            try TokenFollower(socketPath: unknown.path, params: TokenParams(provider: "corp")).run { _ in true }
            Issue.record("an unknown provider was waited for")
        } catch {
            guard case .remote(let remote) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(remote.reason == .unknownProvider)
        }
    }

    @Test("stopping a follower from another thread ends its blocked read")
    func followerStops() async throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in tokenAnswer(id, "at-1") }
        let stop = FollowStop()
        let tokens = Shared(0)
        let follower = TokenFollower(socketPath: daemon.path, params: TokenParams(provider: "corp"))
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? follower.run(stop: stop) { _ in
                tokens.withLock { $0 += 1 }
                return true
            }
            done.signal()
        }
        try await until { tokens.withLock { $0 } == 1 }
        stop.stop()
        #expect(done.wait(timeout: .now() + 60) == .success, "the follower did not stop")
    }
}

/// A value shared with a stand-in's thread or a follower's.
private final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result { value.withLock { body(&$0) } }
}
