import AuthGateTestSupport
import Foundation
import Testing

/// `authgate provider add` on a terminal asks for what its flags left out; without a terminal
/// it asks nothing.
@Suite("provider add asks on a terminal")
struct ProviderAddQuestionTests {
    /// Runs the CLI under a pseudo-terminal, typing each answer once its prompt shows: its
    /// output (stdout and stderr together, as a terminal shows them) and exit status.
    private func onTerminal(_ daemon: DaemonProcess, _ arguments: [String], answers: [(prompt: String, answer: String)]) throws -> (status: Int, output: String)
    {
        let shown = try OnTerminal.run(
            [BuiltProducts.cli.path] + arguments,
            steps: answers.map { .type($0.answer, after: $0.prompt) },
            environment: ["AUTHGATE_SOCKET": daemon.socketPath]
        )
        return (shown.status, shown.output)
    }

    /// The JSON file `--dry-run` printed at the end of a terminal's output (CR LF line ends).
    private static func file(in output: String) throws -> [String: Any] {
        let text = try #require(output.range(of: "{\r\n").map { String(output[$0.lowerBound...]).replacingOccurrences(of: "\r\n", with: "\n") }, "\(output)")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    @Test(
        "the issuer, client id, grants and scopes not given as flags are asked for on a terminal; a preset asks only the client id; without a terminal nothing is asked"
    )
    func asks() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: [:])
        let flags = ["provider", "add", "corp", "--providers-dir", daemon.providersDirectory, "--ca-file", server.caFile, "--dry-run"]

        let asked = try onTerminal(
            daemon,
            flags,
            answers: [
                ("Issuer URL, or a preset", server.issuer), ("Client id", "authgate"), ("Sessions in memory (kept across a restart", "persistent"),
                ("Grants", "password device_code"), ("Scopes", "openid email"),
            ]
        )
        #expect(asked.status == 0, "\(asked.output)")
        let written = try Self.file(in: asked.output)
        #expect(written["issuer"] as? String == server.issuer && written["client_id"] as? String == "authgate", "\(written)")
        #expect(written["grants"] as? [String] == ["password", "device_code"] && written["scopes"] as? [String] == ["openid", "email"])
        #expect(written["storage"] as? String == "persistent", "\(written)")
        #expect(asked.output.contains(server.issuer + " offers:"), "discovery ran on the answered issuer")

        let preset = try onTerminal(daemon, flags, answers: [("Issuer URL, or a preset", "github"), ("Client id", "Iv1.abc"), ("Sessions in memory", "")])
        #expect(preset.status == 0, "\(preset.output)")
        let presetFile = try Self.file(in: preset.output)
        #expect(presetFile["preset"] as? String == "github" && presetFile["client_id"] as? String == "Iv1.abc", "\(presetFile)")
        #expect(presetFile["storage"] == nil, "an empty answer keeps the default, memory")
        #expect(!preset.output.contains("Grants, separated"), "a preset fills the grants")

        // Without a terminal (the test's stdin is not one), as before: the flags alone, and a
        // file without a client id is refused.
        let unattended = try daemon.cli(flags + ["--issuer", server.issuer])
        #expect(
            unattended.status == 5 && unattended.stderr.contains("[provider_file.invalid]") && !unattended.stderr.contains("Client id registered"),
            "\(unattended.stderr)"
        )
    }
}
