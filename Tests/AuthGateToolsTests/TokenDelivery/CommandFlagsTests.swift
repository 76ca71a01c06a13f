import AuthGateClient
import AuthGateTestSupport
import AuthGateTools
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `authgate sink`'s and `authgate exec`'s flags as typed: which the commands refuse (their
/// usage errors), and what they run with. The built CLI prints the same refusals with the
/// command's usage line (SinkTests, ExecSupervisorTests).
@Suite("The sink's and exec's flags: what is refused and what they run with")
struct CommandFlagsTests {
    @Test("sink: a mode not octal or writable by others, no file, a bad --env, --template and --format apart, a timeout out of range")
    func sinkRefusals() {
        let cases: [(TokenSink.Flags, String)] = [
            (TokenSink.Flags(file: "/run/t", mode: "0999"), "--mode must be an octal mode such as 0400 or 0640."),
            (TokenSink.Flags(file: "/run/t", mode: "1777"), "--mode must be an octal mode such as 0400 or 0640."),
            (
                TokenSink.Flags(file: "/run/t", mode: "0666"),
                "--mode 0666 lets every user change the token file; use a mode such as 0400, 0440 or 0600."
            ),
            (
                TokenSink.Flags(file: "/run/t", mode: "0460"),
                "--mode 0460 lets the file's group change the token file; use a mode such as 0400, 0440 or 0600."
            ),
            (TokenSink.Flags(file: ""), "--file must name a file."),
            (TokenSink.Flags(file: "/run/t", env: "1TOKEN"), "--env must be a variable name: letters, digits and _, not starting with a digit."),
            (TokenSink.Flags(file: "/run/t", format: .template), "--format template needs --template FILE."),
            (TokenSink.Flags(file: "/run/t", template: "/etc/t"), "--template goes with --format template."),
            (TokenSink.Flags(file: "/run/t", onChangeTimeout: 0), "--on-change-timeout must be between 0 and 86400 seconds."),
            (TokenSink.Flags(file: "/run/t", onChangeTimeout: 86_401), "--on-change-timeout must be between 0 and 86400 seconds."),
        ]
        for (flags, sentence) in cases {
            #expect(flags.problem == sentence)
        }
        #expect(TokenSink.Flags(file: "/run/t").problem == nil)
        #expect(TokenSink.Flags(file: "/run/t", format: .template, template: "/etc/t", mode: "0640", onChangeTimeout: 86_400).problem == nil)
    }

    @Test("sink: an other-readable mode is usable but warned of; the mode is read as octal")
    func sinkWarning() {
        #expect(TokenSink.Flags(file: "/run/t").warning == nil)
        #expect(TokenSink.Flags(file: "/run/t", mode: "0440").warning == nil)
        #expect(
            TokenSink.Flags(file: "/run/t", mode: "0444").warning
                == "--mode 0444 lets every local user read the token; give the service's group 0440 instead."
        )
        #expect(TokenSink.Flags(file: "/run/t", mode: "0640").fileMode == 0o640)
    }

    @Test("sink: the options carry the flags, --format env with its --env name, a template read and checked at once")
    func sinkOptions() throws {
        let flags = TokenSink.Flags(
            file: "/run/t",
            format: .env,
            env: "API_TOKEN",
            mode: "0440",
            owner: "www-data",
            group: "www-data",
            makesDirectories: true,
            onChange: ["systemctl", "reload", "nginx"],
            onChangeTimeout: 5,
            once: true
        )
        let options = try flags.options()
        guard case .env(let name) = options.format else {
            Issue.record("not the env format")
            return
        }
        #expect(name == "API_TOKEN")
        #expect(options.file == "/run/t" && options.mode == 0o440 && options.owner == "www-data" && options.group == "www-data")
        #expect(options.makesDirectories && options.once && options.onChange == ["systemctl", "reload", "nginx"] && options.onChangeTimeout == 5)
        guard case .nginx = try TokenSink.Flags(file: "/run/t", format: .nginx).options().format else {
            Issue.record("not the nginx format")
            return
        }
        let scratch = try ScratchDirectory()
        chmod(scratch.path, 0o700)
        try scratch.write("good.tmpl", "Authorization: Bearer {{token}}\n")
        try scratch.write("bad.tmpl", "{{password}}\n")
        guard case .template = try TokenSink.Flags(file: "/run/t", format: .template, template: scratch.path + "/good.tmpl").options().format else {
            Issue.record("not the template format")
            return
        }
        let refused = #expect(throws: ToolFailure.self) {
            try TokenSink.Flags(file: "/run/t", format: .template, template: scratch.path + "/bad.tmpl").options()
        }
        #expect(refused?.status == ToolFailure.usage)
        #expect(refused?.description.hasPrefix("the template \(scratch.path)/bad.tmpl cannot be used: ") == true)
    }

    @Test("exec: no command, a bad --env, both change flags, an unknown signal, a token file without a supervisor or a signal without one")
    func execRefusals() {
        let cases: [(Supervisor.Flags, String)] = [
            (Supervisor.Flags(command: []), "Name the command after --, e.g. authgate exec corp -- kubectl get pods."),
            (Supervisor.Flags(command: ["true"], variable: "A-B"), "--env must be a variable name: letters, digits and _, not starting with a digit."),
            (
                Supervisor.Flags(command: ["true"], restartOnChange: true, signalOnChange: "HUP", tokenFile: "/t"),
                "--restart-on-change and --signal-on-change exclude each other: restart the command or signal it."
            ),
            (
                Supervisor.Flags(command: ["true"], signalOnChange: "FOO", tokenFile: "/t"),
                "--signal-on-change FOO is not a signal: use a name such as HUP, USR1 or USR2, or a number."
            ),
            (Supervisor.Flags(command: ["true"], tokenFile: "/t"), "--token-file goes with --restart-on-change or --signal-on-change."),
            (
                Supervisor.Flags(command: ["true"], signalOnChange: "USR1"),
                "--signal-on-change needs --token-file: a running command cannot be handed a new environment."
            ),
        ]
        for (flags, sentence) in cases {
            #expect(flags.problem == sentence)
        }
        #expect(Supervisor.Flags(command: ["true"]).problem == nil)
        #expect(Supervisor.Flags(command: ["true"], restartOnChange: true, tokenFile: "/t").problem == nil)
    }

    @Test("exec: without a change flag no supervisor stays; --restart-on-change restarts; --signal-on-change sends its signal")
    func execOnChange() {
        #expect(Supervisor.Flags(command: ["true"]).onChange == nil)
        guard case .restart = Supervisor.Flags(command: ["true"], restartOnChange: true).onChange else {
            Issue.record("not a restart")
            return
        }
        guard case .signal(let number) = Supervisor.Flags(command: ["true"], signalOnChange: "sigusr1", tokenFile: "/t").onChange else {
            Issue.record("not a signal")
            return
        }
        #expect(number == SIGUSR1)
    }
}
