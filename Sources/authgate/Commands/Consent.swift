import ArgumentParser
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
            print(ConsentText.list(result), terminator: "")
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
            print(ConsentText.revoked(result.revoked))
        }
    }
}
