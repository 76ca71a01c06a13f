import ArgumentParser
import AuthGateRPC
import AuthGateTools

/// `authgate sink`: keeps a file holding a session's current token, for services that read a
/// file (nginx, a systemd `EnvironmentFile=`, a daemon that re-reads its credentials on SIGHUP).
///
/// It follows the session with ``TokenFollower`` (`token.watch`, reconnecting) and rewrites
/// the file atomically on every change (a temp file in the same directory, fsync, rename,
/// fsync of the directory), so a reader never sees a partial or empty file while the session
/// lives. When the session ends (signed out, refused) the file is **removed**, and the log says
/// why: a service then fails loudly instead of sending a dead token. What the file holds is a
/// ``TokenFileFormat``; what is done with each event is ``TokenSink``'s (both tested in process).
///
/// The sink may be root's, so the file's directory is opened once, at start, by
/// `FileTrust.openDirectory` (no directory others could change entries of, no symbolic link
/// another user owns), and every write and the removal are made relative to that descriptor:
/// a link swapped in later cannot lead it into another directory.
struct Sink: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep a file holding a session's current token, rewritten on every change (runs until stopped).",
        discussion: """
            Run it as the service's user, e.g. from a systemd unit (systemd/authgate-sink@.service), or as root \
            with --owner/--group. The file is replaced atomically on each refresh or sign-in, and removed when the \
            session ends. Formats: raw (the token), header (Authorization: Bearer TOKEN), json (the token result), \
            nginx (proxy_set_header Authorization "Bearer TOKEN"; for an include), env (NAME='TOKEN' for systemd's \
            EnvironmentFile=, --env NAME) and template (--template FILE with {{token}}, {{token_type}}, \
            {{expires_at}} and {{expires_in}}, nothing else). Started before the sign-in, it writes the file the \
            moment a sign-in happens. Exits non-zero with a sentence when the provider is unknown or refused to \
            you, and with --once when the file was not written; waits for the daemon and for a sign-in otherwise. \
            Refuses (exit 64) a directory on the file's path that another user owns or may change, a symbolic \
            link another user owns, a --mode others may write, and a template that is not a regular file of root's \
            or yours in such directories, has an unknown placeholder or lacks {{token}}.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(help: ArgumentHelp("The file to keep the token in.", valueName: "path"))
    var file: String

    @Option(help: "What the file holds: raw, header, json, nginx, env or template (see above).")
    var format: TokenSink.FormatName = .raw

    @Option(help: ArgumentHelp("With --format env: the variable's name.", valueName: "name"))
    var env = "AUTHGATE_TOKEN"

    @Option(help: ArgumentHelp("With --format template: the template, read once at start.", valueName: "path"))
    var template: String?

    @Option(help: ArgumentHelp("The file's mode, in octal: no group or other write bit (other-readable draws a warning).", valueName: "octal"))
    var mode = "0400"

    @Flag(help: "Create the file's missing parent directories (mode 0700; 0750 and --group's group with --group).")
    var mkdir = false

    @Option(help: ArgumentHelp("The file's owner, a user name or uid (the sink must run as root).", valueName: "user"))
    var owner: String?

    @Option(help: ArgumentHelp("The file's group, a group name or gid (the sink must run as root).", valueName: "group"))
    var group: String?

    @Flag(help: "Write the file once and exit (non-zero when it was not written).")
    var once = false

    @Option(
        name: .customLong("on-change-timeout"),
        help: ArgumentHelp("Seconds --on-change may run; then SIGTERM, and SIGKILL 5 s later.", valueName: "seconds")
    )
    var onChangeTimeout = 30.0

    @Option(
        name: .customLong("on-change"),
        parsing: .remaining,
        help: ArgumentHelp(
            """
            A command run after each write (the rest of the line), e.g. systemctl reload nginx. It gets no token, runs \
            in the background (one at a time; a failure is logged), and is stopped after --on-change-timeout.
            """,
            valueName: "command"
        )
    )
    var onChange: [String] = []

    /// The flags as typed, for TokenSink to check and to run with.
    private var flags: TokenSink.Flags {
        TokenSink.Flags(
            file: file,
            format: format,
            env: env,
            template: template,
            mode: mode,
            owner: owner,
            group: group,
            makesDirectories: mkdir,
            onChange: onChange,
            onChangeTimeout: onChangeTimeout,
            once: once
        )
    }

    func validate() throws {
        if let problem = flags.problem { throw ValidationError(problem) }
    }

    func run() throws {
        if let warning = flags.warning { Terminal.writeError("authgate sink: warning: \(warning)\n") }
        try TokenSink.run(try flags.options(), params: TokenParams(provider: selection.provider, session: selection.session), daemon: global.daemon)
    }
}

extension TokenSink.FormatName: ExpressibleByArgument {}
