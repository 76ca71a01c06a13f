package import AuthGateCore
package import AuthGateRPC

/// What `authgate info`, `providers`, `reload`, `rekey` and `userinfo` print of the daemon's
/// answer (without `--json`): each text ends without a newline, as `print` adds one.
package enum AnswerText {
    /// `info`: a row per fact, without the table's header.
    package static func info(_ info: DaemonInfo) -> String {
        var rows = [
            ["version", info.version], ["mode", info.mode], ["socket", info.socket], ["providers from", info.configDir],
            ["providers", "\(info.providers)"], ["your sessions", "\(info.sessions)"], ["uptime", "\(info.uptimeSeconds) s"],
        ]
        if let key = info.storageKey { rows.append(["storage key", Terminal.safe(key)]) }
        if let answers = info.cachedTokenAnswers { rows.append(["cached token answers", "\(answers)"]) }
        return Terminal.table(["", ""], rows).split(separator: "\n").dropFirst().joined(separator: "\n")
    }

    /// `providers`: the table (the grants a sign-in may use, `register` when the provider
    /// registers accounts), then why each provider with a status reason has its status; a
    /// sentence when there is none.
    package static func providers(_ providers: [ProviderInfo]) -> String {
        guard !providers.isEmpty else { return "No providers are configured." }
        let rows = providers.map { provider in
            [
                provider.id, provider.type ?? "-", provider.status.rawValue,
                provider.grants.map(\.rawValue).joined(separator: ",") + (provider.registration ? ",register" : ""),
                provider.displayName,
            ]
        }
        var lines = [Terminal.table(["PROVIDER", "TYPE", "STATUS", "SIGN-IN", "NAME"], rows)]
        for provider in providers {
            if let reason = provider.statusReason { lines.append("\n\(provider.id) is \(provider.status.rawValue): \(Terminal.safe(reason))") }
        }
        return lines.joined(separator: "\n")
    }

    /// `reload`: a row per provider the reload touched, then each one's problems and warnings.
    package static func reloaded(_ reports: [ProviderReloadReport]) -> String {
        let rows = reports.map { report in
            [report.id, report.change.rawValue, report.status?.rawValue ?? "-", report.statusReason ?? ""]
        }
        var lines = [Terminal.table(["PROVIDER", "CHANGE", "STATUS", "REASON"], rows)]
        for report in reports {
            for problem in report.problems { lines.append("  error: \(Terminal.safe(problem))") }
            for warning in report.warnings { lines.append("  warning: \(Terminal.safe(warning))") }
        }
        return lines.joined(separator: "\n")
    }

    /// `rekey`: what was sealed under the new key and where the key is kept; then the files no
    /// key opened, if any.
    package static func rekeyed(_ result: StorageRekeyResult) -> String {
        let place = result.storageKey == "secret-service" ? "the Secret Service" : "the state directory's key file"
        var text =
            "Sealed \(result.sessions) session\(result.sessions == 1 ? "" : "s") in \(result.files) file\(result.files == 1 ? "" : "s") "
            + "under a new key, kept in \(place)."
        if result.unreadableFiles > 0 {
            text +=
                "\n\(result.unreadableFiles) file\(result.unreadableFiles == 1 ? "" : "s") no key opens were left as they are (the daemon's log names them)."
        }
        return text
    }

    /// `userinfo`: the claims sorted by name, each value as text (a structured one points to
    /// `--json`).
    package static func claims(_ claims: [String: JSONValue]) -> String {
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
        return Terminal.table(["CLAIM", "VALUE"], rows)
    }
}
