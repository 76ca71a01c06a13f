import AuthGateCore
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// git's credential helper protocol (GitCredentialHelper) in process, against a daemon of one
/// answer; the real git drives the built helper in CredentialHelperTests.
@Suite("git's credential protocol (GitCredentialHelper)")
struct GitCredentialHelperTests {
    /// A helper that may not ask (no sign-in is run) and reports into `said`.
    private func helper(socket: String, said: SharedText) -> GitCredentialHelper {
        GitCredentialHelper(socket: socket, mayAsk: false, report: { said.append(Data(($0 + "\n").utf8)) })
    }

    private static let answer = #"""
        {"jsonrpc":"2.0","id":ID,"result":{"provider":"forge","username":"oauth2","authtype":AUTHTYPE,"token":{"access_token":"tok-123","token_type":"Bearer","expires_at":"2030-01-01T00:00:00Z","scopes":[]}}}
        """#

    @Test("get: the token as the password of the provider's user name, with its expiry; the request names the host, git and the path")
    func getAsPassword() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            Self.answer.replacingOccurrences(of: "ID", with: id).replacingOccurrences(of: "AUTHTYPE", with: "null")
        }
        let said = SharedText()
        let out = try helper(socket: daemon.path, said: said)
            .perform("get", attributes: ["protocol": "https", "host": "Git.Example.com", "path": "team/repo.git"])
        #expect(out == "username=oauth2\npassword=tok-123\npassword_expiry_utc=1893456000\n")
        #expect(daemon.requestText.contains(#""method":"credential.get""#) && daemon.requestText.contains(#""host":"git.example.com""#))
        #expect(daemon.requestText.contains(#""tool":"git""#), "\(daemon.requestText)")
        #expect(daemon.requestText.contains(#""path":"team/repo.git""#), "\(daemon.requestText)")
        #expect(said.text.contains("get: git.example.com path team/repo.git answered by provider forge, session default, user name oauth2"))
        #expect(!said.text.contains("tok-123"), "the report never holds the token")
    }

    @Test("get: a Bearer credential when the provider asks for it and git offers authtype; the password form when git does not offer it, said why")
    func getAsBearer() throws {
        let scratch = try ScratchDirectory()
        let reply = { @Sendable (_: String, id: String) in
            Self.answer.replacingOccurrences(of: "ID", with: id).replacingOccurrences(of: "AUTHTYPE", with: #""bearer""#)
        }
        let offering = try StandInDaemon(in: scratch.path, reply: reply)
        let said = SharedText()
        let bearer = try helper(socket: offering.path, said: said)
            .perform("get", attributes: ["protocol": "https", "host": "git.example.com", "capability[]": "authtype"])
        #expect(bearer == "capability[]=authtype\nauthtype=Bearer\ncredential=tok-123\npassword_expiry_utc=1893456000\n")

        try FileManager.default.removeItem(atPath: offering.path)
        let old = try StandInDaemon(in: scratch.path, reply: reply)
        let basic = try helper(socket: old.path, said: said).perform("get", attributes: ["protocol": "https", "host": "git.example.com"])
        #expect(basic.hasPrefix("username=oauth2\npassword=tok-123\n"))
        #expect(said.text.contains("but git offers no capability[]=authtype: git 2.46 or later does"))
    }

    @Test("as git runs it: version answers without reading stdin; configure and unconfigure without a host are usage errors")
    func runAsGitDoes() throws {
        #expect(
            try GitCredentialHelper.run("version", socket: "/nonexistent", verbose: false) == "git-credential-authgate (authgate) \(AuthGateVersion.current)\n"
        )
        for operation in ["configure", "unconfigure"] {
            let refused = #expect(throws: ToolFailure.self) { try GitCredentialHelper.run(operation, socket: "/nonexistent", verbose: true) }
            #expect(refused?.showsUsage == true && refused?.description == "\(operation) needs the host: authgate git-credential \(operation) HOST")
        }
    }

    @Test("nothing for http, for what is not a host name, for store; version without reading anything; no daemon call for any of them")
    func refusals() throws {
        let said = SharedText()
        let helper = helper(socket: "/nonexistent/authgate.sock", said: said)
        #expect(try helper.perform("get", attributes: ["protocol": "http", "host": "git.example.com"]) == "")
        #expect(try helper.perform("get", attributes: ["protocol": "https", "host": "bad host/../x"]) == "")
        #expect(try helper.perform("store", attributes: ["protocol": "https", "host": "git.example.com", "password": "p"]) == "")
        #expect(try helper.perform("version", attributes: [:]) == "git-credential-authgate (authgate) \(AuthGateVersion.current)\n")
        #expect(said.text.contains("get: nothing for protocol=http: tokens go to https only"))
        #expect(said.text.contains("get: nothing for host=bad host/../x: not a host name"))
        #expect(said.text.contains("store: nothing to do (the daemon keeps the session)"))
    }

    @Test("get with no daemon: the failure says where it looked, with status 2")
    func noDaemon() throws {
        let said = SharedText()
        let failure = #expect(throws: ToolFailure.self) {
            try helper(socket: "/nonexistent/authgate.sock", said: said).perform("get", attributes: ["protocol": "https", "host": "git.example.com"])
        }
        #expect(failure?.status == ToolFailure.daemonUnreachable && failure?.description.contains("/nonexistent/authgate.sock") == true)
    }
}
