import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make the daemon read its provider files again (admins only).",
        discussion:
            "Added providers appear, removed ones go (their sessions are signed out), changed ones are checked again. Like `systemctl reload authgated` or SIGHUP, but it prints what happened."
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let reports = try global.daemon.call(.configReload, EmptyResult(), as: [ProviderReloadReport].self, progress: "Reloading…")
        if global.json { return try global.printJSON(reports) }
        print(AnswerText.reloaded(reports))
    }
}
