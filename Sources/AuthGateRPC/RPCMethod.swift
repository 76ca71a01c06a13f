/// Every method of the daemon's JSON-RPC interface, by its wire name (`noun.verb`).
public enum RPCMethod: String, Sendable, CaseIterable {
    case providersList = "providers.list"
    case login
    case loginBegin = "login.begin"
    case loginComplete = "login.complete"
    case loginCancel = "login.cancel"
    case register
    case token
    /// git's and docker's helpers: the provider that lists a host, and its session's token, in one call.
    case credentialGet = "credential.get"
    case tokenRejected = "token.rejected"
    /// `token`, then `token.changed` and `session.ended` notifications on the same connection.
    case tokenWatch = "token.watch"
    /// A token exchanged for the session's (RFC 8693).
    case tokenExchange = "token.exchange"
    /// A DPoP proof signed with the session's key (RFC 9449).
    case dpopProof = "dpop.proof"
    case userinfo
    /// The caller's remembered consent answers (`authgate consent list`).
    case consentList = "consent.list"
    /// Forgets some of them (`authgate consent revoke`): those programs are asked again.
    case consentRevoke = "consent.revoke"
    case status
    case logout
    /// What a provider gave one of the caller's sessions, never a token (`authgate provider test`).
    case sessionInspect = "session.inspect"
    case daemonInfo = "daemon.info"
    case configReload = "config.reload"
    /// Administrators: an issuer's discovery document, read by the daemon (`provider add --issuer`).
    case providerDiscover = "provider.discover"
    /// Administrators: RFC 7591 dynamic client registration, run by the daemon (`provider add --register`).
    case providerRegister = "provider.register"
    /// Administrators: the RFC 7592 delete of a registered client (`provider remove`).
    case providerDeregister = "provider.deregister"
    /// Administrators: the Prometheus exposition text.
    case metrics
    /// Administrators: every sessions file sealed again under a new storage key.
    case storageRekey = "storage.rekey"
}
