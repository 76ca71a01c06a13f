public import AuthGateCore

/// `credential.get` params: what git's and docker's credential helpers ask in one call — the
/// token for a host, with the provider that lists it for that tool.
public struct CredentialParams: Sendable, Codable, Equatable {
    /// `host` or `host:port`, as git and docker name it (the scheme's default port, 443, is the
    /// same as none).
    public var host: String
    /// `git` or `docker`: the provider's `credential_helper.tools` must name it.
    public var tool: String
    public var minValidSeconds: Int?
    /// The repository's path on the host (`org-a/repo.git`), which git sends with
    /// `credential.useHttpPath`: it chooses among providers with `credential_helper.paths`.
    public var path: String?
    /// The user name git sends (from the URL or `credential.username`): when it names a session
    /// of the chosen provider other than `default`, that session answers.
    public var username: String?

    public init(host: String, tool: String, minValidSeconds: Int? = nil, path: String? = nil, username: String? = nil) {
        self.host = host
        self.tool = tool
        self.minValidSeconds = minValidSeconds
        self.path = path
        self.username = username
    }

    private enum CodingKeys: String, CodingKey {
        case host, tool, path, username
        case minValidSeconds = "min_valid_seconds"
    }

    /// The params as JSON values, for the CLI's plain writer (sorted keys, absent members left
    /// out, as the encoder writes them) instead of the encoder: the helpers run before each of git's and docker's requests, and the
    /// coders' first use would be most of their cost (docs/BENCHMARKS.md). Tested equal to the
    /// encoder's output.
    public var plainParams: [String: JSONValue] {
        var params: [String: JSONValue] = ["host": .string(host), "tool": .string(tool)]
        if let minValidSeconds { params["min_valid_seconds"] = .number(Double(minValidSeconds)) }
        if let path { params["path"] = .string(path) }
        if let username { params["username"] = .string(username) }
        return params
    }
}

/// `credential.get` result; the whole result is `null` when no provider the caller may use
/// lists the host for the tool.
public struct CredentialResult: Sendable, Codable {
    public var provider: String
    /// The user name the helper answers with: `credential_helper.username`, or the one git sent
    /// when it chose the session.
    public var username: String
    /// The session that answers, when the user name git sent chose one; absent: `default`.
    public var session: String?
    /// `bearer` when the provider's `credential_helper.authtype` asks git to send
    /// `Authorization: Bearer`; absent: `basic`.
    public var authtype: String?
    /// The session's token; absent when the session needs a sign-in (`login_required`), which
    /// the helper may then run.
    public var token: TokenResult?

    public init(provider: String, username: String, session: String? = nil, authtype: String? = nil, token: TokenResult?) {
        self.provider = provider
        self.username = username
        self.session = session
        self.authtype = authtype
        self.token = token
    }
}
