import AuthGateCore
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// docker's credential helper protocol (DockerCredentialHelper) in process, against a daemon of
/// one answer; the docker CLI drives the built helper in CredentialHelperTests.
@Suite("docker's credential protocol (DockerCredentialHelper)")
struct DockerCredentialHelperTests {
    private func helper(_ socket: String) -> DockerCredentialHelper {
        DockerCredentialHelper(socket: socket)
    }

    /// `providers.list`'s answer (one line once its newlines are taken out).
    private static let providers = #"""
        {"jsonrpc":"2.0","id":ID,"result":[
         {"id":"registry","display_name":"r","status":"ready","grants":[],"registration":false,
          "credential_helper":{"hosts":["registry.example.com","mirror.example.com:5000"],"username":"oauth2","tools":["docker"]}},
         {"id":"forge","display_name":"f","status":"ready","grants":[],"registration":false,
          "credential_helper":{"hosts":["git.example.com"],"username":"git","tools":["git"]}},
         {"id":"paths","display_name":"p","status":"ready","grants":[],"registration":false,
          "credential_helper":{"hosts":["code.example.com"],"username":"x","paths":["team/"]}}]}
        """#

    @Test("get: the session's token as docker's JSON, the server URL as docker sent it; a server URL that names no host is not found")
    func get() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            #"{"jsonrpc":"2.0","id":\#(id),"result":{"provider":"registry","username":"oauth2","token":{"access_token":"tok-9","token_type":"Bearer","expires_at":"2030-01-01T00:00:00Z","scopes":[]}}}"#
        }
        let answer = try helper(daemon.path).perform("get") { "https://registry.example.com/v2/" }
        #expect(!answer.failed && answer.note == nil)
        let json = try JSONSerialization.jsonObject(with: Data(answer.output.utf8)) as? [String: String]
        #expect(json == ["Secret": "tok-9", "ServerURL": "https://registry.example.com/v2/", "Username": "oauth2"])
        #expect(daemon.requestText.contains(#""host":"registry.example.com""#) && daemon.requestText.contains(#""tool":"docker""#))

        let nowhere = try helper(scratch.path + "/none.sock").perform("get") { "" }
        #expect(nowhere == DockerCredentialHelper.Answer(output: DockerCredentialHelper.notFound, failed: true), "no daemon call for no host")
    }

    @Test("list: the registries of providers that list docker, without git-only hosts or hosts served by path")
    func list() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            Self.providers.replacingOccurrences(of: "\n", with: "").replacingOccurrences(of: "ID", with: id)
        }
        let answer = try helper(daemon.path).perform("list") {
            Issue.record("list reads nothing")
            return ""
        }
        let json = try JSONSerialization.jsonObject(with: Data(answer.output.utf8)) as? [String: String]
        #expect(json == ["registry.example.com": "oauth2", "mirror.example.com:5000": "oauth2"])
    }

    @Test("store is refused with the command that signs in instead, naming the registry's provider; version, help and unknown actions")
    func storeAndTheRest() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            Self.providers.replacingOccurrences(of: "\n", with: "").replacingOccurrences(of: "ID", with: id)
        }
        let store = try helper(daemon.path).perform("store") { #"{"ServerURL":"registry.example.com","Username":"u","Secret":"s3cret"}"# }
        #expect(store.failed && store.output.hasPrefix("authgate does not store credentials from docker login: sign in with `authgate login registry`"))
        #expect(!store.output.contains("s3cret"))

        let offline = helper(scratch.path + "/none.sock")
        #expect(try offline.perform("version") { "" }.output == "docker-credential-authgate (authgate) \(AuthGateVersion.current)")
        #expect(try offline.perform("--help") { "" }.output == DockerCredentialHelper.usage)
        let unknown = try offline.perform("steal\u{1B}[2J") { "" }
        #expect(unknown.failed && unknown.output == #"docker-credential-authgate: unknown action: steal\u{1B}[2J"#)
    }

    @Test(
        "as docker runs it: one action, else the usage (failed); a failed step is its sentence on stdout, failed; configure without a registry is thrown (status 64)"
    )
    func serve() throws {
        let scratch = try ScratchDirectory()
        let offline = helper(scratch.path + "/none.sock")
        #expect(try offline.serve(["get", "extra"]) { "" } == DockerCredentialHelper.Answer(output: DockerCredentialHelper.usage, failed: true))
        let unreachable = try offline.serve(["list"]) { "" }
        #expect(unreachable.failed && unreachable.output.hasPrefix("authgate: ") && unreachable.output.contains("/none.sock"), "\(unreachable)")
        let usage = #expect(throws: ToolFailure.self) { try offline.serve(["configure"]) { "" } }
        #expect(usage?.status == ToolFailure.usage && usage?.description.hasSuffix("[invalid_params]") == true)
    }
}
