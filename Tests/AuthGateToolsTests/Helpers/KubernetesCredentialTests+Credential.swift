import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// kubectl's exec credential (KubernetesCredential.credential) in process, against a daemon of
/// one answer; kubectl itself runs the built plugin in KubectlTests.
extension KubernetesCredentialTests {
    fileprivate static let execInfo = #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#

    @Test("an access token becomes an ExecCredential of the apiVersion kubectl asked for, expiring with the token")
    func accessToken() throws {
        let scratch = try ScratchDirectory()
        let daemon = try StandInDaemon(in: scratch.path) { _, id in
            #"{"jsonrpc":"2.0","id":\#(id),"result":{"access_token":"tok-k","token_type":"Bearer","expires_at":"2030-01-01T00:00:00Z","scopes":[]}}"#
        }
        let credential = try KubernetesCredential.credential(
            provider: "cluster",
            session: nil,
            socket: daemon.path,
            execInfo: KubernetesExecInfo.parse(Array(KubernetesCredentialTests.execInfo.utf8))
        )
        #expect(
            credential
                == .object([
                    "apiVersion": .string("client.authentication.k8s.io/v1beta1"), "kind": .string("ExecCredential"),
                    "status": .object(["expirationTimestamp": .string("2030-01-01T00:00:00Z"), "token": .string("tok-k")]),
                ])
        )
        #expect(daemon.requestText.contains(#""min_valid_seconds":60"#), "valid for at least a minute: \(daemon.requestText)")
    }

    @Test("a session that needs a sign-in: kubectl's non-interactive mode gets one sentence naming authgate login (status 3), and no sign-in runs")
    func signInRequired() throws {
        let scratch = try ScratchDirectory()
        let error = String(decoding: try RPCCoding.makeEncoder().encode(RPCErrorObject(AuthGateError(.loginRequired, "Sign in first."))), as: UTF8.self)
        let daemon = try StandInDaemon(in: scratch.path) { _, id in #"{"jsonrpc":"2.0","id":\#(id),"error":\#(error)}"# }
        let failure = #expect(throws: ToolFailure.self) {
            try KubernetesCredential.credential(
                provider: "cluster",
                session: "ops",
                socket: daemon.path,
                execInfo: KubernetesExecInfo.parse(Array(KubernetesCredentialTests.execInfo.utf8))
            )
        }
        #expect(failure?.status == ToolFailure.signInRequired)
        #expect(
            failure?.description.contains("authgate login cluster --session ops") == true
                && failure?.description.contains("kubectl does not let the plugin ask") == true
        )
    }
}
