import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

/// `authgate consent list|revoke`: the answers you gave to programs asking for a token of a
/// session that asks first (`access.confirm`, `login --confirm`).
struct Consent: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List or revoke the programs you allowed to get your tokens.",
        discussion: """
            Sessions of a provider with "access": {"confirm": true}, and those you signed in to with --confirm, ask you \
            before a program gets their token for the first time. Your answers "allow while it runs" and "always allow" \
            are remembered; revoking one makes the program ask again.
            """,
        subcommands: [List.self, Revoke.self],
        defaultSubcommand: List.self
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the sessions that ask, and your remembered answers.")

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let result = try global.daemon.call(.consentList, EmptyResult(), as: ConsentListResult.self)
            if global.json { return try global.printJSON(result) }
            if !result.sessions.isEmpty {
                print("Sessions that ask because you chose so at sign-in:")
                print(Terminal.table(["PROVIDER", "SESSION"], result.sessions.map { [$0.provider, $0.session] }))
                print("")
            }
            guard !result.answers.isEmpty else { return print("You have no remembered answers: every program is asked.") }
            let rows = result.answers.map { answer in
                [
                    answer.provider, answer.session, answer.answer == "running" ? "while pid \(answer.pid.map(String.init) ?? "?") runs" : "always",
                    Terminal.safe(answer.executable), Terminal.describe(answer.grantedAt),
                ]
            }
            print(Terminal.table(["PROVIDER", "SESSION", "ALLOWED", "PROGRAM", "SINCE"], rows))
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget answers: those programs are asked again.")

        @OptionGroup var global: GlobalOptions

        @Argument(help: "Only this provider's answers.")
        var provider: String?

        @Option(help: "Only this session's answers.")
        var session: String?

        @Option(help: ArgumentHelp("Only this program's answers (its path, as `consent list` shows it).", valueName: "path"))
        var executable: String?

        @Flag(help: "Every answer of yours (needed when no provider, session or program is given).")
        var all = false

        func validate() throws {
            if provider == nil, session == nil, executable == nil, !all {
                throw ValidationError("Say which answers to forget: a provider, --session, --executable, or --all.")
            }
        }

        func run() throws {
            let params = ConsentRevokeParams(provider: provider, session: session, executable: executable)
            let result = try global.daemon.call(.consentRevoke, params, as: ConsentRevokeResult.self)
            if global.json { return try global.printJSON(result) }
            print(
                result.revoked == 0
                    ? "No answer matched; nothing to forget."
                    : "Forgot \(result.revoked) answer\(result.revoked == 1 ? "" : "s"); those programs will be asked again."
            )
        }
    }
}
