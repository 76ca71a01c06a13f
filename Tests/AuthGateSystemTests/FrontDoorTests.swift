import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import NIOCore
import Testing

/// The front door (FrontDoor): it answers plain cached `token` calls itself and hands every
/// other connection on to NIO with what it read, so that a client never sees where it was served.
@Suite("Front door")
struct FrontDoorTests {
    static let token = #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock"}}"#

    private func accessToken(_ reply: [String: Any]) -> String? { (reply.result as? [String: Any])?["access_token"] as? String }

    /// Cached answers given since the daemon started (daemon.info, shown to an administrator).
    private func cachedAnswers(_ daemon: DaemonProcess) throws -> Int {
        let info = try exchange(daemon.connect(), #"{"jsonrpc":"2.0","id":0,"method":"daemon.info"}"#)
        return try #require((info.result as? [String: Any])?["cached_token_answers"] as? Int)
    }

    @Test("a connection answered at the front door is handed on mid-way, and its later lines are answered alike, in order")
    func handedOnMidWay() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        let connection = try daemon.connect()
        #expect(try exchange(connection, Providers.mockLogin).result != nil)
        let viaDispatcher = try connection.callRaw(Self.token)
        let answered = try cachedAnswers(daemon)
        #expect(try connection.callRaw(Self.token) == viaDispatcher)
        #expect(try cachedAnswers(daemon) == answered + 1, "answered from the cache")

        // A request the front door does not answer: the connection goes on to NIO.
        let status = try exchange(connection, #"{"jsonrpc":"2.0","id":3,"method":"status"}"#)
        #expect(status["id"] as? Int == 3 && status.result != nil)
        #expect(try connection.callRaw(Self.token) == viaDispatcher, "the same bytes from NIO's side")

        // A line in two pieces, and two lines in one write, on a fresh connection.
        let split = try daemon.connect()
        let bytes = Array((Self.token + "\n").utf8)
        try split.send(Array(bytes[..<20]))
        try split.send(Array(bytes[20...]))
        #expect(try readReply(split)["id"] as? Int == 2)
        let pipelined = try daemon.connect()
        let lines = [
            Self.token.replacingOccurrences(of: #""id":2"#, with: #""id":7"#), #"{"jsonrpc":"2.0","id":8,"method":"providers.list"}"#,
            Self.token.replacingOccurrences(of: #""id":2"#, with: #""id":9"#),
        ]
        try pipelined.send(Array((lines.joined(separator: "\n") + "\n").utf8))
        let replies = try (0..<3).map { _ in try readReply(pipelined) }
        #expect(replies.map { $0["id"] as? Int } == [7, 8, 9])
        #expect(accessToken(replies[0]) != nil && accessToken(replies[0]) == accessToken(replies[2]))

        // Signed out from another connection: the front door's remembered answer is gone too.
        #expect(try exchange(daemon.connect(), #"{"jsonrpc":"2.0","id":4,"method":"logout","params":{"provider":"mock"}}"#).result != nil)
        #expect(try exchange(try daemon.connect(), Self.token).errorReason == "login_required")
        #expect(!daemon.logText.contains(try #require(accessToken(replies[0]))))
    }

    @Test("`authgate token PROVIDER` writes the plain line the front door answers itself")
    func cliLineIsPlain() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        #expect(try exchange(daemon.connect(), Providers.mockLogin).result != nil)
        let first = try daemon.cli(["token", "mock"])
        let answered = try cachedAnswers(daemon)
        let second = try daemon.cli(["token", "mock"])
        #expect(first.status == 0 && second.status == 0 && !second.stdout.isEmpty && second.stdout == first.stdout)
        #expect(try cachedAnswers(daemon) == answered + 1, "answered at the front door")
    }

    @Test("git's and docker's `credential.get` line is answered at the front door, with the dispatcher's bytes; a line with another member is not")
    func credentialLineIsPlain() throws {
        let provider =
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "credential_helper": {"hosts": ["git.example.com"], "username": "me"}}"#
        let daemon = try DaemonProcess(providers: ["mock.json": provider], logLevel: "info")
        #expect(try exchange(daemon.connect(), Providers.mockLogin).result != nil)
        // The line the helpers write (RPCLine.request with CredentialParams.plainParams).
        let params = CredentialParams(host: "git.example.com", tool: "git", minValidSeconds: 60).plainParams
        let line = String(decoding: RPCLine.request(.credentialGet, params: params).dropLast(), as: UTF8.self)  // callRaw adds the newline
        let before = try cachedAnswers(daemon)
        let viaDispatcher = try daemon.connect().callRaw(line)
        #expect(try cachedAnswers(daemon) == before, "the first answer comes from the session manager, which publishes the token")
        #expect(try daemon.connect().callRaw(line) == viaDispatcher, "the same bytes from the front door")
        #expect(try cachedAnswers(daemon) == before + 1, "answered at the front door")

        // The helpers themselves write that line.
        let git = try daemon.cli(["git-credential", "get"], stdin: "protocol=https\nhost=git.example.com:443\n\n")
        let docker = try daemon.cli(["docker-credential", "get"], stdin: "git.example.com\n")
        #expect(git.status == 0 && git.stdout.hasPrefix("username=me\npassword=mock_at_"))
        #expect(docker.status == 0 && docker.stdout.contains(#""Username":"me""#))
        #expect(try cachedAnswers(daemon) == before + 3)
        // Counted as what they are: four credential.get calls (one by the dispatcher), no token call.
        let metrics = try daemon.cli(["metrics"]).stdout
        #expect(MetricsTests.value(metrics, #"authgate_rpc_requests_total{method="credential.get",outcome="ok"}"#) == 4, "\(metrics)")
        #expect(MetricsTests.value(metrics, #"authgate_rpc_requests_total{method="token",outcome="ok"}"#) ?? 0 == 0)

        // Another member (a later version's `path`): the dispatcher reads the line.
        let withPath = line.replacingOccurrences(of: #""tool":"git""#, with: #""path":"org/repo","tool":"git""#)
        let answer = try exchange(daemon.connect(), withPath)
        #expect(answer["id"] as? Int == 1)
        #expect(try cachedAnswers(daemon) == before + 3, "not answered at the front door")
    }

    @Test("connections held at the front door keep the deadlines: nothing sent within 2 s, or idle after a cached answer")
    func deadlines() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--idle-timeout", "1"], logLevel: "info")
        #expect(try exchange(daemon.connect(), Providers.mockLogin).result != nil)
        _ = try daemon.connect().callRaw(Self.token)
        let silent = try daemon.connect()
        let answeredThenIdle = try daemon.connect()
        let started = ContinuousClock.now
        #expect(accessToken(try exchange(answeredThenIdle, Self.token)) != nil)
        #expect(try answeredThenIdle.receiveLine() == nil, "closed for idling")
        let idled = ContinuousClock.now - started
        #expect(idled >= .seconds(0.9) && idled < .seconds(5), "after the 1 s idle timeout (\(idled))")
        #expect(try silent.receiveLine() == nil, "closed: nothing arrived")
        let silenced = ContinuousClock.now - started
        #expect(silenced >= .seconds(1.9) && silenced < .seconds(6), "after the 2 s first-byte timeout (\(silenced))")
        try daemon.waitForLog("closing a connection: the connection was idle", timeout: .seconds(5))
        try daemon.waitForLog("closing a connection: nothing arrived within", timeout: .seconds(5))
        #expect(accessToken(try exchange(daemon.connect(), Self.token)) != nil, "the daemon serves on")
    }
}
