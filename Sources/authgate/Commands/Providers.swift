import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Providers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the providers you may use, with their status.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let providers = try global.daemon.call(.providersList, EmptyResult(), as: [ProviderInfo].self)
        if global.json { return try global.printJSON(providers) }
        print(AnswerText.providers(providers))
    }
}
