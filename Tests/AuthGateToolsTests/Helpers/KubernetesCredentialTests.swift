import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("kubectl's exec credential plugin")
struct KubernetesCredentialTests {
    @Test("the ExecCredential: kind, API version, token and its expiry in RFC 3339 UTC")
    func execCredential() throws {
        let credential = KubernetesCredential.execCredential(
            apiVersion: KubernetesCredential.apiVersions[1],
            token: "eyJ.token",
            expiresAt: Date(timeIntervalSince1970: 1_800_000_000)
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(credential.jsonBytes)) as? [String: Any])
        #expect(object["kind"] as? String == "ExecCredential" && object["apiVersion"] as? String == "client.authentication.k8s.io/v1beta1")
        #expect(object["status"] as? [String: String] == ["token": "eyJ.token", "expirationTimestamp": "2027-01-15T08:00:00Z"])
    }

    @Test("the flags: --audience sends the access token whatever else is said, and goes not with --token-type id")
    func flags() {
        let exchanged = KubernetesCredential.Options(flags: nil, scopes: ["read"], audience: "api", forceRefresh: true)
        #expect(exchanged.tokenType == .access && exchanged.audience == "api" && exchanged.scopes == ["read"] && exchanged.forceRefresh)
        #expect(KubernetesCredential.Options(flags: .id, scopes: [], audience: nil, forceRefresh: false).tokenType == .id)
        #expect(KubernetesCredential.Options(flags: nil, scopes: [], audience: nil, forceRefresh: false).tokenType == nil)
        #expect(
            KubernetesCredential.Options.problem(tokenType: .id, audience: "api")
                == "--audience exchanges the access token: it goes with --token-type access."
        )
        #expect(KubernetesCredential.Options.problem(tokenType: .access, audience: "api") == nil)
        #expect(KubernetesCredential.Options.problem(tokenType: .id, audience: nil) == nil)
    }

    @Test("--setup: the claims, the set-credentials command with its arguments quoted, and the API server's flags from iss, azp and sub")
    func setup() {
        let claims: [String: JSONValue] = [
            "iss": .string("https://id.example.com"), "aud": .array([.string("kube"), .string("other")]), "azp": .string("kube-cli"),
            "sub": .string("alice"), "groups": .array([.string("dev")]),
        ]
        let text = KubernetesCredential.setupText(provider: "corp", session: "ops team", accessToken: false, claims: claims)
        #expect(text.contains("  groups: [\"dev\"]") && text.contains("  sub: alice"), "\(text)")
        #expect(text.contains("kubectl config set-credentials oidc-corp-ops team --exec-api-version=client.authentication.k8s.io/v1"))
        #expect(text.contains("--exec-arg=kubectl --exec-arg=corp --exec-arg=--session --exec-arg='ops team' --exec-interactive-mode=IfAvailable"))
        #expect(text.contains("--oidc-issuer-url=https://id.example.com\n") && text.contains("--oidc-client-id=kube-cli\n"))
        #expect(text.contains(#""https://id.example.com#alice""#))
        #expect(
            KubernetesCredential.setupText(provider: "corp", session: nil, accessToken: true, claims: [:]).contains("--exec-arg=--token-type --exec-arg=access")
        )
    }

    @Test("one shell word: plain text as it is, anything else single-quoted with its quotes escaped and control characters shown")
    func shellQuoted() {
        #expect(KubernetesCredential.shellQuoted("corp-1.example:443") == "corp-1.example:443")
        #expect(KubernetesCredential.shellQuoted("it's") == #"'it'\''s'"#)
        #expect(KubernetesCredential.shellQuoted("") == "''")
        #expect(KubernetesCredential.shellQuoted("a\u{1B}b") == #"'a\u{1B}b'"#)
    }

    @Test("the kubeconfig users: entry names the provider and session and asks for interactive mode when available")
    func snippet() {
        let text = KubernetesCredential.snippet(provider: "corp", session: "ops")
        #expect(text.contains("- name: corp-ops") && text.contains(#"args: ["kubectl", "corp", "--session", "ops"]"#))
        #expect(text.contains("interactiveMode: IfAvailable") && text.contains("apiVersion: client.authentication.k8s.io/v1\n"))
    }
}
