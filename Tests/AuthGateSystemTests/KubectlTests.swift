import AuthGateTestSupport
import Foundation
import Testing

/// `authgate kubectl` as kubectl's exec credential plugin, with the real kubectl against an API
/// server on loopback (Tests/idp/kube_api.py) that accepts only the session's current token.
@Suite("kubectl exec credential plugin", .serialized)
struct KubectlTests {
    static let hasKubectl = FileManager.default.isExecutableFile(atPath: "/usr/bin/kubectl")

    private func kubeconfig(server: LoopbackServer, daemon: DaemonProcess, interactive: String = "Never") -> String {
        """
        apiVersion: v1
        kind: Config
        clusters:
        - name: test
          cluster:
            server: \(server.issuer)
            certificate-authority: \(server.caFile)
        contexts:
        - name: test
          context: {cluster: test, user: mock}
        current-context: test
        users:
        - name: mock
          user:
            exec:
              apiVersion: client.authentication.k8s.io/v1
              command: \(BuiltProducts.cli.path)
              args: ["kubectl", "mock"]
              env: [{name: AUTHGATE_SOCKET, value: "\(daemon.socketPath)"}]
              interactiveMode: \(interactive)
              provideClusterInfo: false
        """
    }

    @Test(
        "kubectl get --raw /api succeeds through the plugin; a signed-out session fails with the sentence naming authgate login",
        .enabled(if: hasKubectl, "needs kubectl")
    )
    func kubectlThroughThePlugin() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let tokenFile = daemon.scratch.path + "/expected-token"
        try daemon.cli(["token", "mock", "--min-valid", "60"]).stdout.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let server = try LoopbackServer(script: "kube_api.py", workdir: daemon.scratch.path + "/kube", arguments: ["--token-file", tokenFile])
        let config = daemon.scratch.path + "/kubeconfig"
        try kubeconfig(server: server, daemon: daemon).write(toFile: config, atomically: true, encoding: .utf8)
        let environment = ["HOME": daemon.scratch.path, "KUBECACHEDIR": daemon.scratch.path + "/kube-cache"]
        let ok = try run(URL(fileURLWithPath: "/usr/bin/kubectl"), ["--kubeconfig", config, "get", "--raw", "/api"], environment: environment)
        #expect(ok.status == 0 && ok.stdout.contains("APIVersions"), "\(ok.stdout)\(ok.stderr)")

        // What kubectl sent the plugin, and what it printed.
        let credential = try daemon.cli(
            ["kubectl", "mock"],
            prefix: [
                "/usr/bin/env",
                #"KUBERNETES_EXEC_INFO={"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#,
            ]
        )
        let object = try JSONSerialization.jsonObject(with: Data(credential.stdout.utf8)) as? [String: Any]
        #expect(object?["apiVersion"] as? String == "client.authentication.k8s.io/v1beta1")
        let status = object?["status"] as? [String: Any]
        #expect((status?["expirationTimestamp"] as? String)?.hasSuffix("Z") == true && status?["token"] as? String != nil, "\(credential.stdout)")

        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        let refused = try run(URL(fileURLWithPath: "/usr/bin/kubectl"), ["--kubeconfig", config, "get", "--raw", "/api"], environment: environment)
        #expect(refused.status != 0 && refused.stderr.contains("authgate login mock"), "\(refused.stderr)")
        let snippet = try daemon.cli(["kubectl", "mock", "--kubeconfig-snippet"])
        #expect(snippet.stdout.contains("command: authgate") && snippet.stdout.contains(#"args: ["kubectl", "mock"]"#), "\(snippet.stdout)")
    }

    @Test(
        "against an API server that authenticates ID tokens as kube-apiserver's OIDC authenticator does: the ID token (the default for oidc) is accepted and the access token refused; an expired ID token is renewed; --setup's command works in a fresh kubeconfig",
        .enabled(if: hasKubectl, "needs kubectl")
    )
    func idTokens() throws {
        let scratch = try ScratchDirectory()
        // 8 s tokens: the plugin wants half the ID token's lifetime left (4 s), and the test waits one out.
        let idp = try LoopbackServer.idpy(workdir: scratch.path + "/idp", accessTokenLifetime: 8)
        let secretFile = idp.client("authgate-exchange")["secret_file"] as? String ?? ""
        let provider = #"""
            {"type": "oidc", "issuer": "\#(idp.issuer)", "client_id": "authgate-exchange", "client_secret_file": "\#(secretFile)",
             "grants": ["password"], "scopes": ["openid", "read"], "tls": {"ca_file": "\#(idp.caFile)"}}
            """#
        let daemon = try DaemonProcess(providers: ["corp.json": provider], logLevel: "info", scratch: scratch)
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "corp", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let api = try LoopbackServer(
            script: "kube_api.py",
            workdir: scratch.path + "/kube",
            arguments: ["--oidc-issuer-url", idp.issuer, "--oidc-client-id", "authgate-exchange", "--oidc-ca-file", idp.caFile]
        )
        let bin = scratch.path + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bin + "/authgate", withDestinationPath: BuiltProducts.cli.path)
        let environment = [
            "HOME": scratch.path, "KUBECACHEDIR": scratch.path + "/kube-cache", "PATH": bin + ":/usr/bin:/bin",
            "AUTHGATE_SOCKET": daemon.socketPath,
        ]
        let kubectl = URL(fileURLWithPath: "/usr/bin/kubectl")
        func kubeconfig(_ name: String, args: [String]) throws -> String {
            let path = scratch.path + "/" + name
            try """
            apiVersion: v1
            kind: Config
            clusters:
            - name: test
              cluster: {server: "\(api.issuer)", certificate-authority: "\(api.caFile)"}
            contexts:
            - name: test
              context: {cluster: test, user: corp}
            current-context: test
            users:
            - name: corp
              user:
                exec:
                  apiVersion: client.authentication.k8s.io/v1
                  command: authgate
                  args: [\(args.map { "\"\($0)\"" }.joined(separator: ", "))]
                  interactiveMode: Never
                  provideClusterInfo: false
            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        let id = try kubeconfig("id.yaml", args: ["kubectl", "corp"])
        let accepted = try run(kubectl, ["--kubeconfig", id, "get", "--raw", "/api"], environment: environment)
        #expect(accepted.status == 0 && accepted.stdout.contains("APIVersions"), "\(accepted.stdout)\(accepted.stderr)")
        let access = try kubeconfig("access.yaml", args: ["kubectl", "corp", "--token-type", "access"])
        let refused = try run(kubectl, ["--kubeconfig", access, "get", "--raw", "/api"], environment: environment)
        #expect(refused.status != 0 && refused.stderr.contains("You must be logged in to the server"), "the access token is no ID token: \(refused.stderr)")

        // The ExecCredential carries the ID token's own exp.
        let credential = try run(BuiltProducts.cli, ["kubectl", "corp"], environment: environment)
        let status = (try JSONSerialization.jsonObject(with: Data(credential.stdout.utf8)) as? [String: Any])?["status"] as? [String: Any]
        let first = try #require(status?["token"] as? String, "\(credential.stderr)")
        // (The session refreshes in the background every few seconds, so `token --id-token` may
        // already print a newer one: the same kind of token is all that can be compared.)
        #expect(try daemon.cli(["token", "corp", "--id-token"]).stdout.split(separator: ".").count == 3)
        let payload = try #require(first.split(separator: ".").dropFirst().first.map(String.init))
        let padded =
            payload.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            + String(repeating: "=", count: (4 - payload.count % 4) % 4)
        let decoded = try #require(Data(base64Encoded: padded))
        let claims = try #require(try JSONSerialization.jsonObject(with: decoded) as? [String: Any])
        let exp = try #require(claims["exp"] as? Double)
        #expect(status?["expirationTimestamp"] as? String == ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: exp)))

        // Once that ID token has expired, kubectl (with nothing cached) still gets in: renewed.
        try eventually(timeout: .seconds(20)) { Date().timeIntervalSince1970 > exp }
        let renewed = try run(kubectl, ["--kubeconfig", id, "get", "--raw", "/api"], environment: environment)
        #expect(renewed.status == 0, "\(renewed.stderr)")
        let now = try daemon.cli(["token", "corp", "--id-token"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(now != first && !now.isEmpty)

        // kubelogin's setup: the printed command, pasted into a fresh kubeconfig, works.
        let setup = try run(BuiltProducts.cli, ["kubectl", "corp", "--setup"], environment: environment)
        #expect(setup.status == 0, "\(setup.stderr)")
        #expect(
            setup.stdout.contains("--oidc-issuer-url=\(idp.issuer)") && setup.stdout.contains("--oidc-client-id=authgate-exchange")
                && setup.stdout.contains("--oidc-username-claim=sub") && setup.stdout.contains("  sub: "),
            "\(setup.stdout)"
        )
        let command = try #require(setup.stdout.split(separator: "\n").first { $0.contains("kubectl config set-credentials") })
        let fresh = ["KUBECONFIG": scratch.path + "/fresh.yaml"].merging(environment) { first, _ in first }
        let pasted = try run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                String(command) + """
                     && kubectl config set-cluster test --server=\(api.issuer) --certificate-authority=\(api.caFile) \
                     && kubectl config set-context test --cluster=test --user=oidc-corp && kubectl config use-context test \
                     && kubectl get --raw /api
                    """,
            ],
            environment: fresh
        )
        #expect(pasted.status == 0 && pasted.stdout.contains("APIVersions"), "\(pasted.stdout)\(pasted.stderr)")
        #expect(!setup.stdout.contains(now), "the claims, never the token")
    }

    @Test("a provider that returns no ID token on refresh: one sentence, exit 3")
    func noNewIDToken() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok", expiresIn: 3600)
        let provider = #"""
            {"type": "oidc", "issuer": "\#(server.issuer)", "client_id": "authgate", "grants": ["password"], "scopes": ["openid"],
             "tls": {"ca_file": "\#(server.caFile)"}}
            """#
        let daemon = try DaemonProcess(providers: ["faulty.json": provider], logLevel: "info", scratch: scratch)
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        #expect(try daemon.cli(["token", "faulty", "--id-token"]).stdout.split(separator: ".").count == 3, "the sign-in brought an ID token")
        // faulty.py issues an ID token only when the request names the openid scope: a refresh does not.
        for arguments in [["kubectl", "faulty", "--force-refresh"], ["token", "faulty", "--id-token", "--force-refresh"]] {
            let refused = try daemon.cli(arguments)
            #expect(refused.status == 3 && refused.stdout.isEmpty, "\(arguments): \(refused)")
            #expect(
                refused.stderr.contains("returned no new ID token when the session was refreshed") && refused.stderr.contains("authgate login faulty"),
                "\(refused.stderr)"
            )
        }
        let kubectlAccess = try daemon.cli(["kubectl", "faulty", "--token-type", "access"])
        #expect(kubectlAccess.status == 0 && kubectlAccess.stdout.contains("faulty-at-"), "the access token still works: \(kubectlAccess.stderr)")
    }
}
