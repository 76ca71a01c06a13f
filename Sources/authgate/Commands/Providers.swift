import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Providers: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the providers you may use, with their status.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let providers = try global.daemon.call(.providersList, EmptyResult(), as: [ProviderInfo].self)
        if global.json { return try global.printJSON(providers) }
        guard !providers.isEmpty else { return print("No providers are configured.") }
        let rows = providers.map { provider in
            [
                provider.id, provider.type ?? "-", provider.status.rawValue,
                provider.grants.map(\.rawValue).joined(separator: ",") + (provider.registration ? ",register" : ""),
                provider.displayName,
            ]
        }
        print(Terminal.table(["PROVIDER", "TYPE", "STATUS", "SIGN-IN", "NAME"], rows))
        for provider in providers {
            if let reason = provider.statusReason { print("\n\(provider.id) is \(provider.status.rawValue): \(Terminal.safe(reason))") }
        }
    }
}
