import AuthGateCore

/// `credential.get` params: what git's and docker's credential helpers ask in one call — the
/// token for a host, with the provider that lists it for that tool.
public struct CredentialParams: Sendable, Codable, Equatable {
    /// `host` or `host:port`, as git and docker name it (the scheme's default port, 443, is the
    /// same as none).
    public var host: String
    /// `git` or `docker`: the provider's `credential_helper.tools` must name it.
    public var tool: String
    public var minValidSeconds: Int?

    public init(host: String, tool: String, minValidSeconds: Int? = nil) {
        self.host = host
        self.tool = tool
        self.minValidSeconds = minValidSeconds
    }

    private enum CodingKeys: String, CodingKey {
        case host, tool
        case minValidSeconds = "min_valid_seconds"
    }

    /// The params as the JSON encoder writes them (sorted keys), without the encoder: the
    /// helpers run before each of git's and docker's requests, and the coders' first use would
    /// be most of their cost (docs/BENCHMARKS.md). Tested equal to the encoder's output.
    public var plainJSON: String {
        #"{"host":\#(JSONValue.quoted(host))\#(minValidSeconds.map { #","min_valid_seconds":\#($0)"# } ?? ""),"tool":\#(JSONValue.quoted(tool))}"#
    }
}

/// `credential.get` result; the whole result is `null` when no provider the caller may use
/// lists the host for the tool.
public struct CredentialResult: Sendable, Codable {
    public var provider: String
    /// The user name the helper answers with (`credential_helper.username`).
    public var username: String
    /// The session's token; absent when the session needs a sign-in (`login_required`), which
    /// the helper may then run.
    public var token: TokenResult?

    public init(provider: String, username: String, token: TokenResult?) {
        self.provider = provider
        self.username = username
        self.token = token
    }
}
