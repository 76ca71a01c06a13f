import AuthGateCore
import AuthGateTools

extension ProviderFiles.Add {
    /// On a terminal, asks for the answers not given as flags: the issuer or a preset, the
    /// client id and, without a preset (which fills them), the grants and the scopes. An empty
    /// answer leaves the field out. Nothing is asked when stdin is not a terminal: the file is
    /// then made of the flags alone, as for Ansible and friends.
    mutating func askForMissingAnswers() {
        guard Terminal.stdinIsTerminal else { return }
        if preset == nil, issuer == nil,
            let answer = Self.answer("Issuer URL, or a preset (\(ProviderPreset.allCases.map(\.rawValue).joined(separator: ", "))): ")
        {
            if ProviderPreset(rawValue: answer) != nil { preset = answer } else { issuer = answer }
        }
        if clientID == nil { clientID = Self.answer("Client id registered at the provider: ") }
        if storage == nil, let answer = Self.answer("Sessions in \(Self.storageChoices) [memory]: ") {
            storage = answer.lowercased().hasPrefix("p") ? "persistent" : answer.lowercased().hasPrefix("m") ? "memory" : answer
        }
        guard preset == nil else { return }
        if grants.isEmpty, let answer = Self.answer("Grants, separated by spaces (password, device_code, authorization_code, client_credentials): ") {
            grants = answer.split(separator: " ").map(String.init)
        }
        if scopes.isEmpty, let answer = Self.answer("Scopes, separated by spaces (e.g. openid profile email): ") {
            scopes = answer.split(separator: " ").map(String.init)
        }
    }

    /// What each storage means, as the question and the note after writing say it.
    static let storageChoices =
        "memory (kept across a restart or an upgrade of the daemon, signed out at a stop or a reboot) or persistent (sealed on disk, kept across reboots)"

    /// The line typed, trimmed; `nil` when empty or at the end of input.
    private static func answer(_ prompt: String) -> String? {
        let answer = Terminal.ask(prompt)?.trimming(while: \.isWhitespace) ?? ""
        return answer.isEmpty ? nil : answer
    }
}
