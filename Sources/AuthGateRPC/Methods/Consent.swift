public import FoundationEssentials

// The params and results of `consent.list` and `consent.revoke` (docs/RPC.md), with their wire
// names: the caller's own consent answers, never another user's.

/// `consent.list` result.
public struct ConsentListResult: Sendable, Codable, Equatable {
    /// The caller's sessions that ask because the caller chose so at sign-in (`login --confirm`);
    /// those of providers with `access.confirm` ask too, and are not listed here.
    public var sessions: [ConsentSession]
    /// The remembered answers: `always` (an executable file) and `running` (a process).
    public var answers: [ConsentEntry]

    public init(sessions: [ConsentSession], answers: [ConsentEntry]) {
        self.sessions = sessions
        self.answers = answers
    }
}

public struct ConsentSession: Sendable, Codable, Equatable {
    public var provider: String
    public var session: String

    public init(provider: String, session: String) {
        self.provider = provider
        self.session = session
    }
}

/// One remembered answer.
public struct ConsentEntry: Sendable, Codable, Equatable {
    public var provider: String
    public var session: String
    /// `always` or `running`.
    public var answer: String
    /// The program's path as it was when the user answered.
    public var executable: String
    /// The process, for `running`.
    public var pid: Int32?
    public var grantedAt: Date

    public init(provider: String, session: String, answer: String, executable: String, pid: Int32? = nil, grantedAt: Date) {
        self.provider = provider
        self.session = session
        self.answer = answer
        self.executable = executable
        self.pid = pid
        self.grantedAt = grantedAt
    }

    private enum CodingKeys: String, CodingKey {
        case provider, session, answer, executable, pid
        case grantedAt = "granted_at"
    }
}

/// `consent.revoke` params: the answers matching every field given (none: all of the caller's).
public struct ConsentRevokeParams: Sendable, Codable {
    public var provider: String?
    public var session: String?
    public var executable: String?

    public init(provider: String? = nil, session: String? = nil, executable: String? = nil) {
        self.provider = provider
        self.session = session
        self.executable = executable
    }
}

/// `consent.revoke` result: how many answers were forgotten.
public struct ConsentRevokeResult: Sendable, Codable, Equatable {
    public var revoked: Int

    public init(revoked: Int) { self.revoked = revoked }
}
