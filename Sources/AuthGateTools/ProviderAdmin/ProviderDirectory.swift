package import AuthGateCore
package import AuthGateRPC

#if canImport(Glibc)
import Glibc
#endif

/// `authgate provider list|add|remove` on the providers directory: the files with the daemon's
/// status for each, what a reload must show after a file was written or removed, what a
/// discovery document offers, and where the installed schema is. The commands parse, call the
/// daemon and print; this decides (tested in process).
package enum ProviderDirectory {
    /// One file, as `provider list --json` prints it.
    package struct Listing: Encodable, Equatable {
        package var id: String
        package var file: String
        package var valid: Bool
        package var problems: [String]
        /// The daemon's status; `nil` when the daemon cannot be asked or has not loaded it.
        package var status: String?
        package var statusReason: String?

        enum CodingKeys: String, CodingKey {
            case id, file, valid, problems, status
            case statusReason = "status_reason"
        }
    }

    /// The files of `directory` as the daemon's loader reads them, each with what the daemon
    /// made of it when it answers (``listings(_:loaded:)``).
    package static func listings(directory: String, daemon: DaemonConnection) throws(ToolFailure) -> (listings: [Listing], daemonAnswered: Bool) {
        let reports: [ProviderFileReport]
        do {
            reports = try ProviderConfigurationLoader.load(directory: directory)
        } catch {
            throw ToolFailure("\(Terminal.safe(error.description)) [provider_file.unreadable]", status: ToolFailure.inputRefused)
        }
        // The files are read here; the daemon adds what it made of them, when it can be asked.
        let loaded = try? DaemonConnection(socket: daemon.socketPath).providers()
        return (listings(reports, loaded: loaded), loaded != nil)
    }

    /// The files as the daemon's loader reads them, each with what the daemon made of it
    /// (`loaded`: its providers, `nil` when it could not be asked).
    package static func listings(_ reports: [ProviderFileReport], loaded: [ProviderInfo]?) -> [Listing] {
        reports.map { report in
            let info = loaded?.first { $0.id == report.id }
            return Listing(
                id: report.id,
                file: report.file,
                valid: report.configuration != nil,
                problems: report.problems.map(\.description),
                status: info?.status.rawValue,
                statusReason: info?.statusReason
            )
        }
    }

    /// `provider list`'s rows: the id, whether the file is valid, the daemon's status ("?" when
    /// it could not be asked, "not loaded" when it has no such provider) and the path.
    package static func rows(_ listings: [Listing], daemonAnswered: Bool) -> [[String]] {
        listings.map { listing in
            [listing.id, listing.valid ? "valid" : "invalid", listing.status ?? (daemonAnswered ? "not loaded" : "?"), listing.file]
        }
    }

    /// `provider list`'s text: the table of ``rows(_:daemonAnswered:)``, then each file's
    /// problems; a sentence naming `directory` when it holds no provider file.
    package static func text(_ listings: [Listing], daemonAnswered: Bool, directory: String) -> String {
        guard !listings.isEmpty else { return "No provider files in \(directory)." }
        let rows = rows(listings, daemonAnswered: daemonAnswered)
        var lines = [Terminal.table(["PROVIDER", "FILE", "DAEMON", "PATH"], rows.map { $0.map(Terminal.safe) })]
        for listing in listings {
            for problem in listing.problems { lines.append("  error: \(Terminal.safe(problem))") }
        }
        return lines.joined(separator: "\n")
    }

    /// What a reload after writing (`added`) or removing `id`'s file in `directory` reported of
    /// it: its report (`nil` once it is gone). A daemon that still lacks an added provider, or
    /// still has a removed one, reads another directory: a failure that says so (with the
    /// directory it reads, `daemonReads()`, when it says), never a success.
    package static func reloaded(
        _ reports: [ProviderReloadReport],
        id: ProviderID,
        added: Bool,
        directory: String,
        daemonReads: () -> String?
    ) throws(ToolFailure) -> ProviderReloadReport? {
        let report = reports.first { $0.id == id.rawValue && $0.change != .removed }
        guard added == (report == nil) else { return report }
        let reads = daemonReads().map { " (it reads \(Terminal.safe($0)))" } ?? ""
        throw ToolFailure(
            added
                ? "The daemon reloaded but has no provider \(id.rawValue): it does not read \(Terminal.safe(directory))\(reads). Pass the daemon's directory with --providers-dir. [provider_file.not_loaded]"
                : "The daemon reloaded and still has \(id.rawValue): it reads its providers from another directory than \(Terminal.safe(directory))\(reads). [provider_file.not_loaded]",
            status: ToolFailure.inputRefused
        )
    }

    /// The sentence for ``reloaded(_:id:added:directory:daemonReads:)``'s report.
    package static func reloadSentence(_ report: ProviderReloadReport?, id: ProviderID) -> String {
        guard let report else { return "The daemon reloaded; \(id.rawValue) is gone." }
        let reason = report.statusReason.map { " (\(Terminal.safe($0)))" } ?? ""
        return "The daemon reloaded: \(id.rawValue) is \(report.status?.rawValue ?? report.change.rawValue)\(reason)."
    }

    /// What a discovery document offers, a line each, for a person; then a warning for each
    /// grant of `chosen` it does not list.
    package static func describe(_ offer: ProviderOffer, chosen: [Grant]) -> String {
        func list(_ values: [String]) -> String { values.isEmpty ? "not said" : values.map(Terminal.safe).joined(separator: ", ") }
        func endpoint(_ url: String?) -> String { url.map(Terminal.safe) ?? "none" }
        var lines = [
            "\(Terminal.safe(offer.issuer)) offers:",
            "  grants:                  \(offer.grantTypes.map(list) ?? "not said (all are tried)")",
            "  PKCE methods:            \(list(offer.codeChallengeMethods))",
            "  DPoP algorithms:         \(list(offer.dpopSigningAlgs))",
            "  PAR endpoint:            \(endpoint(offer.pushedAuthorizationRequestEndpoint))\(offer.requirePushedAuthorizationRequests ? " (required)" : "")",
            "  device endpoint:         \(endpoint(offer.deviceAuthorizationEndpoint))",
            "  registration endpoint:   \(endpoint(offer.registrationEndpoint))",
            "  revocation endpoint:     \(endpoint(offer.revocationEndpoint))\(offer.revocationEndpoint == nil ? " (sign-out only forgets the tokens here)" : "")",
            "  token endpoint auth:     \(list(offer.tokenEndpointAuthMethods))",
            "  scopes:                  \(list(offer.scopes))",
        ]
        for grant in chosen where !offer.grants.contains(grant) {
            lines.append("warning: the provider does not list the \(grant.rawValue) grant; the daemon will try it anyway.")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The installed docs/provider.schema.json as a `file://` URL: `PREFIX/share/doc/authgate/`
    /// beside `executable`'s `PREFIX/bin` (this process's, by default), where `scripts/install`
    /// puts it; `nil` when it is not there.
    package static func installedSchema(executable: String? = ownExecutable()) -> String? {
        guard let executable else { return nil }
        let prefix = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/")
        let path = prefix + "/" + ProviderFileDraft.installedSchemaPath
        guard access(path, R_OK) == 0 else { return nil }
        return "file://" + path
    }

    /// This process's executable (`/proc/self/exe`).
    package static func ownExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
