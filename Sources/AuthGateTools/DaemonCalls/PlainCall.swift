import AuthGateClient
package import AuthGateCore
package import AuthGateRPC
package import FoundationEssentials

/// The helpers' calls through AuthGateClient's plain calls (answers read without the Codable
/// coders, whose first use costs a helper's process as much as the rest of it), their failures
/// as ``ToolFailure``s.
package enum PlainCall {
    /// The `result` of `method` called with `params`; an error answer is reported as any call's
    /// (``ToolFailure``, with its reason and exit status).
    package static func result(_ method: RPCMethod, params: [String: JSONValue] = [:], socket: String?) throws -> JSONValue {
        do throws(RPCClientError) {
            return try AuthGateClient(socketPath: socket).plainResult(method, params: params)
        } catch {
            throw ToolFailure(error, json: false)
        }
    }

    /// ``result(_:params:socket:)`` with the params encoded from their RPC type (for calls
    /// rarer than the helpers' plain ones, where the encoder's first use does not matter).
    package static func result<Params: Encodable>(_ method: RPCMethod, _ params: Params, socket: String?) throws -> JSONValue {
        guard let encoded = try? RPCCoding.makeEncoder().encode(params), case .object(let members)? = try? JSONValue.parse(encoded) else {
            throw ToolFailure("cannot encode the \(method.rawValue) call", status: ToolFailure.internalError)
        }
        return try result(method, params: members, socket: socket)
    }

    /// The access token and its expiry (seconds since 1970) from a `token` result.
    package static func token(_ result: JSONValue) throws -> (token: String, tokenType: String, expiresAt: Date) {
        guard let object = result.objectValue, let token = object["access_token"]?.stringValue,
            let type = object["token_type"]?.stringValue, let expires = object["expires_at"]?.stringValue,
            let date = UTCTimestamp.parse(expires)
        else {
            throw ToolFailure("unexpected answer from authgated: a token result without its fields", status: ToolFailure.internalError)
        }
        return (token, type, date)
    }
}

extension PlainCall {
    /// The session's access token alone, as `authgate token PROVIDER` prints it: for plain
    /// params (a provider id and nothing else) by the plain request line of ``RPCLine`` and
    /// ``RPCLine/bareAccessToken(in:)`` (no JSON coder: the CLI's whole-process cost,
    /// docs/BENCHMARKS.md), else by the decoder, which decodes the token alone (decoding
    /// `expires_at` as a date also loaded the local time zone). A failure is any call's
    /// (``ToolFailure``); a plain call that fails on the way is repeated the ordinary way, which
    /// reports it.
    package static func accessToken(_ params: TokenParams, socket: String?) throws(ToolFailure) -> String {
        if let reply = plainTokenCall(params, socket: socket) {
            if let token = RPCLine.bareAccessToken(in: reply) { return token }
            do throws(RPCClientError) {
                return try AuthGateClient.decodeReply(reply, as: BareToken.self).accessToken
            } catch {
                throw ToolFailure(error, json: false)
            }
        }
        return try DaemonConnection(socket: socket, json: false).call(.token, params, as: BareToken.self).accessToken
    }

    /// The reply line to the plain `token` request; `nil` for params that are not plain or when
    /// the call failed on the way.
    private static func plainTokenCall(_ params: TokenParams, socket: String?) -> [UInt8]? {
        guard params.session == nil, params.minValidSeconds == nil, params.forceRefresh == nil, params.scopes == nil, params.resource == nil,
            ProviderID.isValid(params.provider)  // else the ordinary path says what is wrong
        else { return nil }
        return AuthGateClient(socketPath: socket).plainTokenReply(provider: params.provider)
    }

    /// The part of a `token` result that is printed.
    private struct BareToken: Decodable {
        var accessToken: String

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token"
        }
    }
}
