import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateCore
@testable import AuthGateDaemon
@testable import AuthGateServer

#if canImport(Glibc)
import Glibc
#endif

/// Answers consent questions from a script, and records them.
final class ScriptedAsker: ConsentAsker {
    private let replies: Mutex<[ConsentReply]>
    private let asked = Mutex<[ConsentQuestion]>([])
    /// Held until released, when a test needs a question to stay open.
    private let gate: Mutex<CheckedContinuation<Void, Never>?> = Mutex(nil)
    private let holds: Bool

    init(_ replies: [ConsentReply], holds: Bool = false) {
        self.replies = Mutex(replies)
        self.holds = holds
    }

    var description: String { "scripted" }
    var questions: [ConsentQuestion] { asked.withLock { $0 } }

    func ask(_ question: ConsentQuestion, timeout: Duration) async -> ConsentReply {
        asked.withLock { $0.append(question) }
        if holds {
            // Let go after 30 s at the latest: a test that fails before it releases the question
            // must end, not wait for it forever.
            Task { [weak self] in
                try? await Task.sleep(for: .seconds(30))
                _ = self?.release()
            }
            await withCheckedContinuation { continuation in gate.withLock { $0 = continuation } }
        }
        return replies.withLock { $0.isEmpty ? .answered(.deny) : $0.removeFirst() }
    }

    /// Lets a held question answer; false while none is held yet.
    func release() -> Bool {
        guard let continuation = gate.withLock({ $0.take() }) else { return false }
        continuation.resume()
        return true
    }
}

/// Consent in process: the dispatcher's token methods on a mock provider whose file says
/// `access.confirm`, the caller this test process itself (so its /proc identity is real), the
/// user's answers scripted. ConsentTests proves the same through the socket and a real askpass.
@Suite("Consent decisions (in process)")
struct ConsentKeeperTests {
    private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    private let me = PeerCredentials(pid: getpid(), uid: 1000, gid: 1000, process: ProcessIdentity(pid: getpid()))

    private func dispatcher(_ consent: ConsentKeeper, confirm: Bool = true) -> RPCDispatcher {
        let file = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"confirm": \#(confirm)}}"#
        let report = ProviderConfigurationLoader.parse(Data(file.utf8), id: "mock", file: "mock.json")
        let registry = ProviderRegistry([RegisteredProvider.make(report, logger: quiet)])
        let context = DaemonContext(configDirectory: "/nonexistent", mode: .user, socketPath: "/nonexistent/s.sock", adminGroup: "none", servesAdmin: true)
        return RPCDispatcher(methods: .inMemory(registry: registry, context: context, logger: quiet, consent: consent), logger: quiet)
    }

    private func call(_ dispatcher: RPCDispatcher, _ method: String, _ params: [String: Any], as caller: PeerCredentials? = nil) async throws -> [String: Any] {
        let request: [String: Any] = ["jsonrpc": "2.0", "id": 1, "method": method, "params": params]
        let answer = try #require(await dispatcher.respond(to: try JSONSerialization.data(withJSONObject: request), from: caller ?? me))
        return try #require(try JSONSerialization.jsonObject(with: answer) as? [String: Any])
    }

    private func signIn(_ dispatcher: RPCDispatcher, _ extra: [String: Any] = [:]) async throws {
        let login = try await call(
            dispatcher,
            "login",
            ["provider": "mock", "username": "demo", "password": "demo-password-1"].merging(extra) { _, new in new }
        )
        #expect(login["result"] != nil, "\(login)")
    }

    private func reason(_ answer: [String: Any]) -> String? {
        ((answer["error"] as? [String: Any])?["data"] as? [String: Any])?["reason"] as? String
    }

    private func message(_ answer: [String: Any]) -> String { (answer["error"] as? [String: Any])?["message"] as? String ?? "" }

    private func token(_ dispatcher: RPCDispatcher, as caller: PeerCredentials? = nil) async throws -> [String: Any] {
        try await call(dispatcher, "token", ["provider": "mock"], as: caller)
    }

    @Test(
        "one user's slow identifications (a large script touched before each request) wait in that user's own line: another user's request is answered meanwhile"
    )
    func slowIdentificationsWaitInTheirOwnLine() async throws {
        let held = HeldIdentifications()
        defer { held.release() }
        let asker = ScriptedAsker(Array(repeating: .answered(.once), count: 12))
        let consent = ConsentKeeper(
            directory: nil,
            asker: asker,
            logger: quiet,
            findProgram: { caller, tools in
                // uid 1000 hashes for as long as the test holds it, on a thread of NIO's pool.
                if caller.uid == 1000 { held.enterAndWait() }
                return ConsentProgram.find(pid: caller.pid, uid: caller.uid, tools: tools)
            }
        )
        let dispatcher = dispatcher(consent)
        let other = PeerCredentials(pid: getpid(), uid: 1001, gid: 1001, process: ProcessIdentity(pid: getpid()))
        try await signIn(dispatcher)
        let login = try await call(dispatcher, "login", ["provider": "mock", "username": "demo", "password": "demo-password-1"], as: other)
        #expect(login["result"] != nil, "\(login)")

        // More of uid 1000's requests than identifications have threads (4).
        let flood = Task { () async throws -> Int in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 { group.addTask { try await token(dispatcher)["result"] != nil } }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
        }
        try await until { held.entered >= 1 }
        let answer = Task { () async throws -> Bool in try await token(dispatcher, as: other)["result"] != nil }
        let answered = await result(of: answer, timeout: .seconds(20))
        #expect(try answered?.get() == true, "uid 1001's request waited behind uid 1000's identifications")
        #expect(held.entered == 1, "uid 1000's identifications ran one at a time")
        held.release()
        #expect(try await result(of: flood)?.get() == 8, "uid 1000's requests were all answered in turn")
        #expect(held.mostAtOnce == 1)
    }

    @Test("allow once asks again next time; deny refuses with consent_denied; the question names the program, pid, uid and provider")
    func onceAndDeny() async throws {
        let asker = ScriptedAsker([.answered(.once), .answered(.once), .answered(.deny)])
        let dispatcher = dispatcher(ConsentKeeper(directory: nil, asker: asker, logger: quiet))
        try await signIn(dispatcher)
        #expect(try await token(dispatcher)["result"] != nil)
        #expect(try await token(dispatcher)["result"] != nil)
        #expect(asker.questions.count == 2, "once is for one request")
        let denied = try await token(dispatcher)
        #expect(reason(denied) == "consent_denied", "\(denied)")
        #expect(message(denied).contains("you denied it"))
        let question = try #require(asker.questions.first)
        #expect(question.pid == getpid() && question.uid == 1000 && question.provider.rawValue == "mock")
        #expect(question.executable == ConsentKeeper.executablePath(getpid()) && question.executable.hasPrefix("/"))
        #expect(question.text.contains("pid \(getpid())") && question.text.contains("uid 1000"))
    }

    @Test("allow while it runs: not asked again for the same process; another process is asked")
    func whileRunning() async throws {
        let asker = ScriptedAsker([.answered(.running), .answered(.deny)])
        let dispatcher = dispatcher(ConsentKeeper(directory: nil, asker: asker, logger: quiet))
        try await signIn(dispatcher)
        #expect(try await token(dispatcher)["result"] != nil)
        #expect(try await token(dispatcher)["result"] != nil)
        #expect(asker.questions.count == 1)
        let other = Process()
        other.executableURL = URL(fileURLWithPath: "/bin/sleep")
        other.arguments = ["30"]
        try other.run()
        defer {
            // SIGKILL: the child inherits the test thread's signal mask, where SIGTERM may be blocked.
            kill(other.processIdentifier, SIGKILL)
            other.waitUntilExit()
        }
        let pid = other.processIdentifier
        let identity = try #require(ProcessIdentity(pid: pid) as ProcessIdentity?)
        let sleeper = PeerCredentials(pid: pid, uid: 1000, gid: 1000, process: identity)
        #expect(reason(try await token(dispatcher, as: sleeper)) == "consent_denied")
        #expect(asker.questions.count == 2)
    }

    @Test("always: remembered across a restart in consent.json, per executable; revoke asks again")
    func alwaysAndRevoke() async throws {
        let scratch = try ScratchDirectory()
        let first = ScriptedAsker([.answered(.always)])
        // This process is the daemon here, and so one of authgate's own executables, which is
        // never allowed always (ConsentProgramTests): as a program of its own instead.
        let plain = ToolFiles(identities: [])
        let dispatcher = dispatcher(ConsentKeeper(directory: scratch.path, asker: first, logger: quiet, tools: plain))
        try await signIn(dispatcher)
        #expect(try await token(dispatcher)["result"] != nil)
        let file = try String(contentsOfFile: scratch.path + "/consent.json", encoding: .utf8)
        #expect(file.contains(ConsentKeeper.executablePath(getpid())) && !file.contains("mock-at"), "\(file)")
        let mode = try FileManager.default.attributesOfItem(atPath: scratch.path + "/consent.json")[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let later = ScriptedAsker([.answered(.deny)])
        let restarted = self.dispatcher(ConsentKeeper(directory: scratch.path, asker: later, logger: quiet, tools: plain))
        try await signIn(restarted)
        #expect(try await token(restarted)["result"] != nil)
        #expect(later.questions.isEmpty, "a remembered executable is not asked")
        let listed = try await call(restarted, "consent.list", [:])
        let answers = ((listed["result"] as? [String: Any])?["answers"] as? [[String: Any]]) ?? []
        #expect(answers.count == 1 && answers.first?["answer"] as? String == "always", "\(listed)")
        let revoked = try await call(restarted, "consent.revoke", ["provider": "mock"])
        #expect((revoked["result"] as? [String: Any])?["revoked"] as? Int == 1)
        #expect(reason(try await token(restarted)) == "consent_denied")
        #expect(later.questions.count == 1, "revoked: asked again")
    }

    @Test("no answer in time, a question that cannot be shown, no way to ask: each denies with its own sentence")
    func refusals() async throws {
        let asker = ScriptedAsker([.timedOut, .failed("notify-send could not be started: No such file or directory")])
        let dispatcher = dispatcher(ConsentKeeper(directory: nil, asker: asker, timeout: .seconds(7), logger: quiet))
        try await signIn(dispatcher)
        let late = try await token(dispatcher)
        #expect(reason(late) == "consent_denied" && message(late).contains("did not answer within 7 s"), "\(late)")
        let broken = try await token(dispatcher)
        #expect(message(broken).contains("could not be asked (notify-send could not be started"), "\(broken)")
        let nobody = self.dispatcher(ConsentKeeper(directory: nil, asker: nil, logger: quiet))
        try await signIn(nobody)
        let refused = try await token(nobody)
        #expect(reason(refused) == "consent_denied" && message(refused).contains("no way to ask you"), "\(refused)")
    }

    @Test("every way to a token asks: credential.get, token.exchange, token.watch, token.rejected, dpop.proof, userinfo")
    func everyMethodAsks() async throws {
        let asker = ScriptedAsker([])  // denies every question
        let dispatcher = dispatcher(ConsentKeeper(directory: nil, asker: asker, logger: quiet))
        try await signIn(dispatcher)
        let calls: [(String, [String: Any])] = [
            ("token.exchange", ["provider": "mock", "audience": "api"]),
            ("token.rejected", ["provider": "mock", "access_token": "whatever"]),
            ("dpop.proof", ["provider": "mock", "htm": "GET", "htu": "https://api.example.com/"]),
            ("userinfo", ["provider": "mock"]),
        ]
        for (method, params) in calls {
            let answer = try await call(dispatcher, method, params)
            #expect(reason(answer) == "consent_denied", "\(method): \(answer)")
        }
        // token.watch needs a connection to notify on: refused for that first, so it is proved
        // through the socket (ConsentTests), as credential.get is with a provider that lists a host.
        #expect(asker.questions.count == calls.count)
    }

    @Test("a session's own choice at sign-in: login confirm=true asks on a provider that does not; confirm=false ends it; a sign-out ends it")
    func chosenAtSignIn() async throws {
        let asker = ScriptedAsker([.answered(.deny)])
        let consent = ConsentKeeper(directory: nil, asker: asker, logger: quiet)
        let dispatcher = dispatcher(consent, confirm: false)
        try await signIn(dispatcher)
        #expect(try await token(dispatcher)["result"] != nil)
        #expect(asker.questions.isEmpty)
        try await signIn(dispatcher, ["confirm": true])
        #expect(reason(try await token(dispatcher)) == "consent_denied")
        let listed = try await call(dispatcher, "consent.list", [:])
        #expect(((listed["result"] as? [String: Any])?["sessions"] as? [[String: Any]])?.first?["provider"] as? String == "mock", "\(listed)")
        try await signIn(dispatcher, ["confirm": false])
        #expect(try await token(dispatcher)["result"] != nil)
        try await signIn(dispatcher, ["confirm": true])
        _ = try await call(dispatcher, "logout", ["provider": "mock"])
        try await signIn(dispatcher)
        #expect(try await token(dispatcher)["result"] != nil, "the choice ended with the session")
        #expect(asker.questions.count == 1)
    }

    @Test("concurrent requests of one process share one question; other sessions are answered meanwhile")
    func oneQuestionAtATime() async throws {
        let asker = ScriptedAsker([.answered(.once)], holds: true)
        let consent = ConsentKeeper(directory: nil, asker: asker, logger: quiet)
        let dispatcher = dispatcher(consent)
        try await signIn(dispatcher)
        async let first = token(dispatcher)
        async let second = token(dispatcher)
        // Waiting by sleeping, not by blocking a thread of the pool these requests run on.
        try await until { !asker.questions.isEmpty && consent.callersWaiting(uid: 1000) == 2 }
        // The question waits: a provider call of another kind goes on.
        #expect(try await call(dispatcher, "consent.list", [:])["result"] != nil)
        try await until { asker.release() }
        let answers = try await [first, second]
        #expect(answers.allSatisfy { $0["result"] != nil }, "\(answers)")
        #expect(asker.questions.count == 1)
    }
}

/// Identifications that block their thread until the test releases them (a large file hashed),
/// counting how many run at once.
final class HeldIdentifications: Sendable {
    private struct State {
        var inside = 0
        var entered = 0
        var mostAtOnce = 0
        var released = false
    }

    private let state = Mutex(State())

    var entered: Int { state.withLock { $0.entered } }
    var mostAtOnce: Int { state.withLock { $0.mostAtOnce } }

    /// Blocks until ``release()`` (or 30 s, so that a failing test still ends).
    func enterAndWait() {
        state.withLock { current in
            current.inside += 1
            current.entered += 1
            current.mostAtOnce = max(current.mostAtOnce, current.inside)
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !state.withLock({ $0.released }), ContinuousClock.now < deadline { usleep(2_000) }
        state.withLock { $0.inside -= 1 }
    }

    func release() { state.withLock { $0.released = true } }
}
