import AuthGateCore
import FoundationEssentials

extension SessionManager {
    /// The current tokens of `key`, how and when they were obtained (`session.inspect`).
    func inspection(of key: SessionKey) -> (grant: Grant, tokens: TokenSet, obtainedAt: Date)? {
        guard let record = sessions[key], let tokens = record.tokens else { return nil }
        return (record.grant, tokens, record.obtainedAt)
    }
}
