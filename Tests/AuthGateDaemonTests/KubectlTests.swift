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

    @Test("kubectl get --raw /api succeeds through the plugin; a signed-out session fails with the sentence naming authgate login",
          .enabled(if: hasKubectl, "needs kubectl"))
    func kubectlThroughThePlugin() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        #expect(try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n").status == 0)
        let tokenFile = daemon.scratch.path + "/expected-token"
        try daemon.cli(["token", "mock", "--min-valid", "60"]).stdout.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let server = try LoopbackServer(script: "kube_api.py", workdir: daemon.scratch.path + "/kube", arguments: ["--token-file", tokenFile])
        let config = daemon.scratch.path + "/kubeconfig"
        try kubeconfig(server: server, daemon: daemon).write(toFile: config, atomically: true, encoding: .utf8)
        let environment = ["HOME": daemon.scratch.path, "KUBECACHEDIR": daemon.scratch.path + "/kube-cache"]
        let ok = try run(URL(fileURLWithPath: "/usr/bin/kubectl"), ["--kubeconfig", config, "get", "--raw", "/api"], environment: environment)
        #expect(ok.status == 0 && ok.stdout.contains("APIVersions"), "\(ok.stdout)\(ok.stderr)")

        // What kubectl sent the plugin, and what it printed.
        let credential = try daemon.cli(["kubectl", "mock"], prefix: ["/usr/bin/env", #"KUBERNETES_EXEC_INFO={"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#])
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
}
