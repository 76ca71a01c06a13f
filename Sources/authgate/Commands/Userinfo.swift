import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Userinfo: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show who you are signed in as: the provider's claims about you.")

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    func run() throws {
        let claims = try global.daemon.call(.userinfo, UserinfoParams(provider: selection.provider, session: selection.session), as: [String: JSONValue].self)
        if global.json { return try global.printJSON(claims) }
        let rows = claims.sorted { $0.key < $1.key }.map { key, claim -> [String] in
            let value: String =
                switch claim {
                case .string(let text): text
                case .null: "null"
                case .bool(let flag): "\(flag)"
                // Whole numbers without ".0"; Int64 only where it holds them (1e300 would trap it).
                case .number(let number): number.rounded() == number && abs(number) < 9e15 ? "\(Int64(number))" : "\(number)"
                case .array, .object: "(structured; see --json)"
                }
            return [key, value]
        }
        print(Terminal.table(["CLAIM", "VALUE"], rows))
    }
}
