import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate provider list|add|remove`'s decisions on the providers directory (ProviderDirectory),
/// in process: the daemon's answers are made here.
@Suite("The providers directory as the CLI sees it (ProviderDirectory)")
struct ProviderDirectoryTests {
    private let corp = ProviderID("corp")!

    private func report(_ id: String, change: ProviderChange, status: ProviderStatus? = .ready, reason: String? = nil) -> ProviderReloadReport {
        ProviderReloadReport(
            id: id,
            file: "/etc/authgate/providers.d/\(id).json",
            change: change,
            status: status,
            statusReason: reason,
            problems: [],
            warnings: []
        )
    }

    @Test("a listing joins each file with the daemon's status: not loaded if the daemon lacks it, ? if it cannot be asked; then the problems")
    func listings() {
        let good = ProviderConfigurationLoader.parse(Data(#"{"type": "mock"}"#.utf8), id: "corp", file: "d/corp.json")
        let bad = ProviderConfigurationLoader.parse(Data(#"{"type": "oidc"}"#.utf8), id: "broken", file: "d/broken.json")
        let loaded = [
            ProviderInfo(
                id: "corp",
                displayName: "corp",
                type: "mock",
                status: .ready,
                statusReason: nil,
                grants: [.password],
                registration: false,
                storage: nil
            )
        ]
        let listings = ProviderDirectory.listings([good, bad], loaded: loaded)
        #expect(listings.map(\.id) == ["corp", "broken"])
        #expect(listings[0].valid && listings[0].problems.isEmpty && listings[0].status == "ready")
        #expect(!listings[1].valid && !listings[1].problems.isEmpty && listings[1].status == nil)
        #expect(ProviderDirectory.rows(listings, daemonAnswered: true).map { $0[2] } == ["ready", "not loaded"])
        #expect(ProviderDirectory.rows(ProviderDirectory.listings([good, bad], loaded: nil), daemonAnswered: false).map { $0[2] } == ["?", "?"])
        let json = String(decoding: try! JSONEncoder().encode(listings[0]), as: UTF8.self)
        #expect(json.contains(#""status":"ready""#) && !json.contains("statusReason"))
        let text = ProviderDirectory.text(listings, daemonAnswered: true, directory: "d").split(separator: "\n")
        #expect(text[0].split(separator: " ") == ["PROVIDER", "FILE", "DAEMON", "PATH"])
        #expect(text[1].hasPrefix("corp") && text[1].contains("valid") && text[2].hasPrefix("broken") && text[2].contains("not loaded"))
        #expect(text.count == 3 + listings[1].problems.count && text[3].hasPrefix("  error: "))
        #expect(ProviderDirectory.text([], daemonAnswered: true, directory: "/etc/authgate/providers.d") == "No provider files in /etc/authgate/providers.d.")
    }

    @Test(
        "after a write the reload must show the provider, after a removal it must not: otherwise the daemon reads another directory, said with the one it reads"
    )
    func reloads() throws {
        var asked = 0
        let reads = { () -> String? in
            asked += 1
            return "/srv/providers.d"
        }
        let added = try ProviderDirectory.reloaded([report("corp", change: .added)], id: corp, added: true, directory: "/etc/p", daemonReads: reads)
        #expect(added?.change == .added && asked == 0, "the daemon's directory is asked for only on a failure")
        #expect(try ProviderDirectory.reloaded([report("corp", change: .removed)], id: corp, added: false, directory: "/etc/p", daemonReads: reads) == nil)
        #expect(ProviderDirectory.reloadSentence(added, id: corp) == "The daemon reloaded: corp is ready.")
        #expect(ProviderDirectory.reloadSentence(nil, id: corp) == "The daemon reloaded; corp is gone.")
        let unreachable = report("corp", change: .changed, status: .unreachable, reason: "connection refused")
        #expect(ProviderDirectory.reloadSentence(unreachable, id: corp) == "The daemon reloaded: corp is unreachable (connection refused).")

        #expect {
            _ = try ProviderDirectory.reloaded([report("other", change: .added)], id: corp, added: true, directory: "/etc/p", daemonReads: reads)
        } throws: { error in
            let failure = error as? ToolFailure
            return failure?.status == ToolFailure.inputRefused
                && failure?.description
                    == "The daemon reloaded but has no provider corp: it does not read /etc/p (it reads /srv/providers.d). Pass the daemon's directory with --providers-dir. [provider_file.not_loaded]"
        }
        #expect {
            _ = try ProviderDirectory.reloaded([report("corp", change: .changed)], id: corp, added: false, directory: "/etc/p") { nil }
        } throws: { error in
            "\(error)" == "The daemon reloaded and still has corp: it reads its providers from another directory than /etc/p. [provider_file.not_loaded]"
        }
        #expect(asked == 1)
    }

    @Test("what a discovery document offers is listed, a grant chosen that it does not list is warned about, and what it sends is made safe to print")
    func describe() {
        let offer = ProviderOffer(
            issuer: "https://sso.example.com\u{1B}[2J",
            tokenEndpoint: "https://sso.example.com/token",
            authorizationEndpoint: "https://sso.example.com/authorize",
            deviceAuthorizationEndpoint: nil,
            pushedAuthorizationRequestEndpoint: "https://sso.example.com/par",
            requirePushedAuthorizationRequests: true,
            registrationEndpoint: nil,
            grantTypes: ["authorization_code", "refresh_token"],
            grants: [.authorizationCode],
            codeChallengeMethods: ["S256"],
            dpopSigningAlgs: [],
            tokenEndpointAuthMethods: ["client_secret_basic"],
            scopes: ["openid"]
        )
        let text = ProviderDirectory.describe(offer, chosen: [.authorizationCode, .deviceCode])
        #expect(text.hasPrefix(#"https://sso.example.com\u{1B}[2J offers:"#))
        #expect(text.contains("  PAR endpoint:            https://sso.example.com/par (required)\n"))
        #expect(text.contains("  device endpoint:         none\n") && text.contains("  DPoP algorithms:         not said\n"))
        #expect(text.hasSuffix("warning: the provider does not list the device_code grant; the daemon will try it anyway.\n"))
        #expect(!text.contains("the authorization_code grant"))
    }

    @Test("the installed schema is PREFIX/share/doc/authgate/provider.schema.json beside PREFIX/bin, when it is there")
    func installedSchema() throws {
        let scratch = try ScratchDirectory()
        let executable = scratch.path + "/bin/authgate"
        #expect(ProviderDirectory.installedSchema(executable: executable) == nil)
        try FileManager.default.createDirectory(atPath: scratch.path + "/share/doc/authgate", withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: URL(fileURLWithPath: scratch.path + "/share/doc/authgate/provider.schema.json"))
        #expect(ProviderDirectory.installedSchema(executable: executable) == "file://" + scratch.path + "/share/doc/authgate/provider.schema.json")
    }
}
