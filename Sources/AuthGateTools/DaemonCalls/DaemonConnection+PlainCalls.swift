import AuthGateClient
package import AuthGateCore
package import AuthGateRPC
package import FoundationEssentials

// The calls of the processes other programs run before each of their requests — `authgate
// token PROVIDER`, the plugin kubectl runs, the credential.get of git's and docker's helpers —
// through AuthGateClient's plain calls: their answers are read without the Codable coders,
// whose first use costs such a process as much as the rest of it (docs/BENCHMARKS.md). Every
// other call decodes its answer's Codable type (``DaemonConnection/call(_:_:as:progress:)``).

extension DaemonConnection {
    /// The `result` of `method` called with `params`, as a JSON value; an error answer is
    /// reported as any call's (``ToolFailure``, with its reason and exit status).
    package func plainResult(_ method: RPCMethod, params: [String: JSONValue]) throws(ToolFailure) -> JSONValue {
        do throws(RPCClientError) {
            return try client.plainResult(method, params: params)
        } catch {
            throw ToolFailure(error, json: false)
        }
    }

    /// The session's access token alone, as `authgate token PROVIDER` prints it: for plain
    /// params (a provider id and nothing else) by the plain request line of ``RPCLine`` and
    /// ``RPCLine/bareAccessToken(in:)`` (no JSON coder: the CLI's whole-process cost,
    /// docs/BENCHMARKS.md), else by the decoder, which decodes the token alone (decoding
    /// `expires_at` as a date also loaded the local time zone). A failure is any call's
    /// (``ToolFailure``); a plain call that fails on the way is repeated the ordinary way, which
    /// reports it.
    package func accessToken(_ params: TokenParams) throws(ToolFailure) -> String {
        if let reply = plainTokenCall(params) {
            if let token = RPCLine.bareAccessToken(in: reply) { return token }
            do throws(RPCClientError) {
                return try AuthGateClient.decodeReply(reply, as: BareToken.self).accessToken
            } catch {
                throw ToolFailure(error, json: false)
            }
        }
        return try call(.token, params, as: BareToken.self).accessToken
    }

    /// The reply line to the plain `token` request; `nil` for params that are not plain or when
    /// the call failed on the way.
    private func plainTokenCall(_ params: TokenParams) -> [UInt8]? {
        guard params.session == nil, params.minValidSeconds == nil, params.forceRefresh == nil, params.scopes == nil, params.resource == nil,
            ProviderID.isValid(params.provider)  // else the ordinary path says what is wrong
        else { return nil }
        return client.plainTokenReply(provider: params.provider)
    }

    /// The part of a `token` result that is printed.
    private struct BareToken: Decodable {
        var accessToken: String

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
        }
    }
}

/// A session's token as the tools hand it on: from a plain call's answer, or from the
/// decoded ``TokenResult`` of any other.
package struct SessionToken: Sendable {
    package var token: String
    package var tokenType: String
    package var expiresAt: Date
    /// The session's ID token, when it has one.
    package var idToken: String?

    package init(token: String, tokenType: String, expiresAt: Date, idToken: String? = nil) {
        self.token = token
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.idToken = idToken
    }

    package init(_ result: TokenResult) {
        self.init(token: result.accessToken.exposedValue, tokenType: result.tokenType, expiresAt: result.expiresAt, idToken: result.idToken?.exposedValue)
    }

    /// The fields of a plain call's `token` result (``DaemonConnection/plainResult(_:params:)``).
    package init(plain result: JSONValue) throws(ToolFailure) {
        guard let object = result.objectValue, let token = object["access_token"]?.stringValue,
            let type = object["token_type"]?.stringValue, let expires = object["expires_at"]?.stringValue,
            let date = UTCTimestamp.parse(expires)
        else {
            throw ToolFailure("unexpected answer from authgated: a token result without its fields", status: ToolFailure.internalError)
        }
        self.init(token: token, tokenType: type, expiresAt: date, idToken: object["id_token"]?.stringValue)
    }
}
