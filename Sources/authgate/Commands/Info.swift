import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the daemon's version, mode and counts.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let info = try global.daemon.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self)
        if global.json { return try global.printJSON(info) }
        print(AnswerText.info(info))
    }
}
