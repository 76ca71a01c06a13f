import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the daemon's version, mode and counts.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let info = try global.daemon.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self)
        if global.json { return try global.printJSON(info) }
        var rows = [
            ["version", info.version], ["mode", info.mode], ["socket", info.socket], ["providers from", info.configDir],
            ["providers", "\(info.providers)"], ["your sessions", "\(info.sessions)"], ["uptime", "\(info.uptimeSeconds) s"],
        ]
        if let key = info.storageKey { rows.append(["storage key", Terminal.safe(key)]) }
        if let answers = info.cachedTokenAnswers { rows.append(["cached token answers", "\(answers)"]) }
        print(Terminal.table(["", ""], rows).split(separator: "\n").dropFirst().joined(separator: "\n"))
    }
}
