import ArgumentParser
import AuthGateCore
import AuthGateRPC
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `authgate kubectl PROVIDER`: a kubectl exec credential plugin
/// (client.authentication.k8s.io): prints an `ExecCredential` with the session's token and its
/// expiry, so kubectl reuses it until then and asks again after.
struct Kubectl: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "kubectl's exec credential plugin: print an ExecCredential with the session's token.",
        discussion: """
            Put `authgate kubectl PROVIDER --kubeconfig-snippet` into your kubeconfig's users. When the session \
            needs a sign-in and kubectl lets the plugin use the terminal (interactiveMode), the provider's \
            sign-in runs there; otherwise one sentence on stderr names `authgate login PROVIDER`.
            """)

    static let apiVersions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Flag(name: .customLong("kubeconfig-snippet"), help: "Print the users: entry to paste into a kubeconfig, and exit.")
    var kubeconfigSnippet = false

    func run() throws {
        if kubeconfigSnippet { return print(snippet()) }
        try Self.printCredential(provider: selection.provider, session: selection.session, socket: global.socket)
    }

    /// The plugin itself; `authgate kubectl PROVIDER` comes here without the argument parser.
    static func printCredential(provider: String, session: String?, socket: String?) throws {
        let info = ProcessInfo.processInfo.environment["KUBERNETES_EXEC_INFO"]
            .flatMap { KubernetesExecInfo.parse(Array($0.utf8)) }
        let apiVersion = info?.apiVersion.flatMap { Self.apiVersions.contains($0) ? $0 : nil } ?? Self.apiVersions[0]
        let params = #"{"min_valid_seconds":60,"provider":\#(PlainCall.quoted(provider))\#(session.map { #","session":\#(PlainCall.quoted($0))"# } ?? "")}"#
        let result: (token: String, tokenType: String, expiresAt: Date)
        do {
            result = try PlainCall.token(PlainCall.result(.token, params: params, socket: socket))
        } catch let error as CLIError where error.exitCode == ExitStatus.signInRequired {
            guard info?.interactive == true else {
                throw CLIError(message: PointOfUseSignIn.sentence(provider: provider, session: session, why: "kubectl does not let the plugin ask"),
                               exitCode: ExitStatus.signInRequired)
            }
            guard try PointOfUseSignIn.run(provider: provider, session: session, socket: socket, tool: "kubectl") else {
                throw CLIError(message: PointOfUseSignIn.sentence(provider: provider, session: session, why: "there is no terminal to run it on"),
                               exitCode: ExitStatus.signInRequired)
            }
            result = try PlainCall.token(PlainCall.result(.token, params: params, socket: socket))
        }
        // Written by hand, like the request: the coders' first use would be most of the cost.
        print(#"{"apiVersion":\#(PlainCall.quoted(apiVersion)),"kind":"ExecCredential","status":{"expirationTimestamp":"\#(rfc3339(result.expiresAt))","token":\#(PlainCall.quoted(result.token))}}"#)
    }

    /// `2026-11-25T10:04:12Z`.
    static func rfc3339(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let date = "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
        return date + "T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    private func snippet() -> String {
        let name = selection.provider + (selection.session.map { "-\($0)" } ?? "")
        let args = ["kubectl", selection.provider] + (selection.session.map { ["--session", $0] } ?? [])
        return """
            users:
            - name: \(name)
              user:
                exec:
                  apiVersion: \(Self.apiVersions[0])
                  command: authgate
                  args: [\(args.map { "\"\($0)\"" }.joined(separator: ", "))]
                  interactiveMode: IfAvailable
                  provideClusterInfo: false
            """
    }
}
