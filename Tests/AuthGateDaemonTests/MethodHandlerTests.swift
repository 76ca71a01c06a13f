import AuthGateTestSupport
import CLinux
import Foundation
import Logging
import Testing

@testable import AuthGateCore
@testable import AuthGateDaemon
@testable import AuthGateServer

#if canImport(Glibc)
import Glibc
#endif

/// The dispatcher and the method handlers in process: a mock provider and the session manager
/// on one injected clock, the caller's credentials made up, the answers read as JSON. The
/// process-level tests prove the socket; these prove the methods.
@Suite("Method handlers (in process, injected clock)")
struct MethodHandlerTests {
    private let clock = ManualClock()
    private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    private let alice = PeerCredentials(pid: 4242, uid: 1000, gid: 1000)
    private let bob = PeerCredentials(pid: 4343, uid: 1001, gid: 1001)

    private func dispatcher(servesAdmin: Bool = true, adminGroup: String = "no-such-group-here") -> RPCDispatcher {
        let file = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": 300}"#
        let report = ProviderConfigurationLoader.parse(Data(file.utf8), id: "mock", file: "mock.json")
        let registry = ProviderRegistry([RegisteredProvider.make(report, now: { [clock] in clock.now }, logger: quiet)])
        let context = DaemonContext(
            configDirectory: "/nonexistent",
            mode: .system,
            socketPath: "/nonexistent/s.sock",
            adminGroup: adminGroup,
            servesAdmin: servesAdmin
        )
        return RPCDispatcher(
            methods: .inMemory(registry: registry, context: context, logger: quiet, now: { [clock] in clock.now }, random: { 0 }),
            logger: quiet
        )
    }

    /// Sends one request and returns the answer as a JSON object.
    private func call(_ dispatcher: RPCDispatcher, _ method: String, _ params: [String: Any]? = nil, as caller: PeerCredentials) async throws -> [String: Any] {
        var request: [String: Any] = ["jsonrpc": "2.0", "id": 1, "method": method]
        if let params { request["params"] = params }
        let line = try JSONSerialization.data(withJSONObject: request)
        let answer = try #require(await dispatcher.respond(to: line, from: caller))
        return try #require(try JSONSerialization.jsonObject(with: answer) as? [String: Any])
    }

    private func reason(_ answer: [String: Any]) -> String? {
        ((answer["error"] as? [String: Any])?["data"] as? [String: Any])?["reason"] as? String
    }

    @Test("sign in, a token kept until it must be refreshed, then a new one; status never shows a token")
    func tokenLifecycle() async throws {
        let dispatcher = dispatcher()
        let login = try await call(dispatcher, "login", ["provider": "mock", "username": "demo", "password": "demo-password-1"], as: alice)
        #expect((login["result"] as? [String: Any])?["state"] as? String == "authenticated", "\(login)")
        let first = try await call(dispatcher, "token", ["provider": "mock", "min_valid_seconds": 60], as: alice)
        let firstToken = try #require((first["result"] as? [String: Any])?["access_token"] as? String)
        clock.advance(by: 200)  // 100 s left: enough for 60
        let same = try await call(dispatcher, "token", ["provider": "mock", "min_valid_seconds": 60], as: alice)
        #expect((same["result"] as? [String: Any])?["access_token"] as? String == firstToken)
        clock.advance(by: 60)  // 40 s left: refreshed first
        let renewed = try await call(dispatcher, "token", ["provider": "mock", "min_valid_seconds": 60], as: alice)
        let renewedToken = try #require((renewed["result"] as? [String: Any])?["access_token"] as? String)
        #expect(renewedToken != firstToken)
        let status = try await call(dispatcher, "status", as: alice)
        let text = String(describing: status)
        #expect(!text.contains(firstToken) && !text.contains(renewedToken) && text.contains("authenticated"))
    }

    @Test("an admin group's member learns nothing of files they cannot read through ca_file: a missing file, a root-only one and /etc/shadow get one sentence")
    func caFileIsNoOracle() async throws {
        // nogroup as the admin group, and a member of it (by primary group) who is not root.
        let dispatcher = dispatcher(adminGroup: "nogroup")
        let member = PeerCredentials(pid: 4444, uid: 65534, gid: 65534)
        let scratch = try ScratchDirectory()
        try scratch.write("root-only.pem", "-----BEGIN CERTIFICATE-----\n")
        chmod(scratch.path + "/root-only.pem", 0o600)
        var messages: [String] = []
        for file in [scratch.path + "/no-such.pem", scratch.path + "/root-only.pem", "/etc/shadow"] {
            let answer = try await call(dispatcher, "provider.discover", ["issuer": "https://sso.example.com", "ca_file": file], as: member)
            #expect(reason(answer) == "validation_failed", "\(answer)")
            messages.append(((answer["error"] as? [String: Any])?["message"] as? String ?? "").replacingOccurrences(of: file, with: "FILE"))
        }
        #expect(Set(messages).count == 1, "\(messages)")
        #expect(messages.first?.contains("a CA file everyone may read") == true, "\(messages)")
    }

    @Test("one uid never reaches another's session; admin methods (reload, discovery, registration) refuse a plain user")
    func separation() async throws {
        let dispatcher = dispatcher()
        _ = try await call(dispatcher, "login", ["provider": "mock", "username": "demo", "password": "demo-password-1"], as: alice)
        #expect(reason(try await call(dispatcher, "token", ["provider": "mock"], as: bob)) == "login_required")
        #expect(((try await call(dispatcher, "status", as: bob))["result"] as? [Any])?.isEmpty == true)
        #expect(reason(try await call(dispatcher, "status", ["all": true], as: bob)) == "permission_denied")
        #expect(reason(try await call(dispatcher, "config.reload", as: bob)) == "permission_denied")
        #expect(reason(try await call(dispatcher, "provider.discover", ["issuer": "https://sso.example.com"], as: bob)) == "permission_denied")
        let register: [String: Any] = ["issuer": "https://sso.example.com", "grants": ["authorization_code"], "redirect_uris": ["http://127.0.0.1/callback"]]
        #expect(reason(try await call(dispatcher, "provider.register", register, as: bob)) == "permission_denied")
        let deregister = ["registration_client_uri": "https://sso.example.com/register/1", "registration_access_token": "t"]
        #expect(reason(try await call(dispatcher, "provider.deregister", deregister, as: bob)) == "permission_denied")
    }

    @Test(
        "--no-admin: over such a socket (one forwarded with ssh -R) every admin method answers permission_denied to the daemon's own uid and root, and no connection reaches a loopback listener; sign-in and tokens still work"
    )
    func noAdmin() async throws {
        // A loopback listener that discovery, registration and deregistration would reach.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        #expect(bound && listen(listener, 8) == 0)
        _ = fcntl(listener, F_SETFL, O_NONBLOCK)
        let origin = "https://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"

        let dispatcher = dispatcher(servesAdmin: false)
        let me = PeerCredentials(pid: 4444, uid: UInt32(geteuid()), gid: UInt32(getegid()))
        let root = PeerCredentials(pid: 4545, uid: 0, gid: 0)
        let register: [String: Any] = ["issuer": origin, "grants": ["authorization_code"], "redirect_uris": ["http://127.0.0.1/callback"]]
        let deregister = ["registration_client_uri": origin + "/register/1", "registration_access_token": "t"]
        for caller in [me, root] {
            for (method, params) in [
                ("config.reload", nil), ("provider.discover", ["issuer": origin]), ("provider.register", register),
                ("provider.deregister", deregister), ("storage.rekey", nil), ("metrics", nil), ("status", ["all": true]),
            ] as [(String, [String: Any]?)] {
                let answer = try await call(dispatcher, method, params, as: caller)
                #expect(reason(answer) == "permission_denied", "\(method): \(answer)")
                #expect(String(describing: answer).contains("--no-admin"), "\(method) says why")
            }
        }
        #expect(accept(listener, nil, nil) < 0 && errno == EAGAIN, "nothing reached the loopback listener")
        let login = try await call(dispatcher, "login", ["provider": "mock", "username": "demo", "password": "demo-password-1"], as: me)
        #expect((login["result"] as? [String: Any])?["state"] as? String == "authenticated", "\(login)")
        #expect((try await call(dispatcher, "token", ["provider": "mock"], as: me))["result"] != nil)
        let info = try #require(try await call(dispatcher, "daemon.info", as: me)["result"] as? [String: Any])
        #expect(info["refresh"] == nil, "no admin-only figures in daemon.info either")
    }

    @Test("params are checked by the method's own type, naming the field and never its value")
    func params() async throws {
        let dispatcher = dispatcher()
        #expect(reason(try await call(dispatcher, "token", as: alice)) == "invalid_params")
        let wrongType = try await call(dispatcher, "login", ["provider": "mock", "username": 7, "password": "s3cret-value"], as: alice)
        #expect(reason(wrongType) == "invalid_params")
        let text = String(describing: wrongType)
        #expect(text.contains("username") && !text.contains("s3cret-value"))
        #expect(reason(try await call(dispatcher, "token", ["provider": "mock", "min_valid_seconds": 86_401], as: alice)) == "invalid_params")
        #expect(reason(try await call(dispatcher, "no.such.method", as: alice)) == "method_not_found")
        // status takes its params or none.
        #expect((try await call(dispatcher, "status", as: alice))["result"] != nil)
    }
}
