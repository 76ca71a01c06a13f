import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// What the RPC types write and read back, in process: requests, results, errors and
/// notifications, and what a reader refuses.
@Suite("The RPC codec: round trips and refusals")
struct RPCCodecTests {
    private static let expiry = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("a request's envelope and params read back as written; a number id and a string id both survive")
    func requestRoundTrip() throws {
        for id in [RPCID.number(42), .string("call-7")] {
            let params = TokenParams(provider: "corp", session: "work", minValidSeconds: 60)
            let line = try RPCCoding.makeEncoder().encode(RPCRequest(id: id, method: .token, params: params))
            let envelope = try RPCCoding.makeDecoder().decode(RPCRequestEnvelope.self, from: line)
            #expect(envelope.jsonrpc == "2.0" && envelope.method == "token" && envelope.id == id && envelope.hasID)
            let read = try RPCCoding.makeDecoder().decode(ParamsOnly<TokenParams>.self, from: line).params
            #expect(read.provider == "corp" && read.session == "work" && read.minValidSeconds == 60)
        }
    }

    @Test("a result written by the daemon's success line decodes to the values it was encoded from")
    func resultRoundTrip() throws {
        let result = TokenResult(accessToken: Secret("at-1"), tokenType: "DPoP", expiresAt: Self.expiry, scopes: ["openid", "email"], idToken: nil)
        var line: [UInt8] = []
        RPCLine.success(id: Array("9".utf8), result: Array(try RPCCoding.makeEncoder().encode(result)), into: &line)
        #expect(line.last == 0x0A)
        let read = try RPCConnection.decodeReply(Array(line.dropLast()), id: .number(9), as: TokenResult.self)
        #expect(read.accessToken.exposedValue == "at-1" && read.tokenType == "DPoP")
        #expect(read.expiresAt == Self.expiry && read.scopes == ["openid", "email"] && read.idToken == nil)
    }

    @Test("an error line carries the reason's code, the sentence, refused fields and the wait; a client reads them all back")
    func errorRoundTrip() throws {
        let error = AuthGateError(
            .rateLimited,
            "Too many sign-ins; wait a minute.",
            fields: [FieldError(field: "password", message: "wrong")],
            retryAfterSeconds: 60
        )
        let line = RPCLine.error(error, id: .number(3))
        #expect(line.last == 0x0A && line.dropLast().allSatisfy { $0 != 0x0A })
        do throws(RPCClientError) {
            _ = try RPCConnection.decodeReply(Array(line.dropLast()), id: .number(3), as: EmptyResult.self)
            Issue.record("an error answer decoded as a result")
        } catch {
            guard case .remote(let remote) = error else {
                Issue.record("not the daemon's error: \(error)")
                return
            }
            #expect(remote.code == ErrorReason.rateLimited.rpcCode && remote.reason == .rateLimited)
            #expect(remote.description == "Too many sign-ins; wait a minute.")
            #expect(remote.data?.retryAfterSeconds == 60 && remote.data?.fields?.map(\.field) == ["password"])
        }
        // A line the daemon could not read is answered with a null id (JSON-RPC 2.0 §5).
        let unread = try JSONSerialization.jsonObject(with: Data(RPCLine.error(AuthGateError(.parseError, "not JSON"), id: nil))) as? [String: Any]
        #expect(unread?.keys.contains("id") == true && unread?["id"] is NSNull)
        #expect((unread?["error"] as? [String: Any])?["code"] as? Int == -32700)
    }

    @Test("an error object without authgate's data still names its reason, from the code; an unknown code is internal")
    func errorWithoutData() throws {
        let known = try RPCCoding.makeDecoder().decode(RPCErrorObject.self, from: Data(#"{"code":-32601,"message":"no such method"}"#.utf8))
        #expect(known.reason == .methodNotFound && known.description == "no such method")
        let unknown = try RPCCoding.makeDecoder().decode(RPCErrorObject.self, from: Data(#"{"code":-1,"message":"?"}"#.utf8))
        #expect(unknown.reason == .internalError)
    }

    @Test("notifications have no id and read back: token.changed with its token, session.ended with its reason")
    func notificationRoundTrip() throws {
        let changed = RPCNotification(
            method: TokenChanged.method,
            params: TokenChanged(provider: "corp", session: "default", accessToken: Secret("at-2"), tokenType: "Bearer", expiresAt: Self.expiry, scopes: [])
        )
        let encoded = try RPCCoding.makeEncoder().encode(changed)
        let object = try JSONSerialization.jsonObject(with: encoded) as? [String: Any]
        #expect(object?["id"] == nil && object?["jsonrpc"] as? String == "2.0" && object?["method"] as? String == "token.changed")
        #expect((object?["params"] as? [String: Any])?["access_token"] as? String == "at-2", "the token on the wire as it is")
        let read = try RPCCoding.makeDecoder().decode(RPCNotification<TokenChanged>.self, from: encoded)
        #expect(read.params.accessToken.exposedValue == "at-2" && read.params.expiresAt == Self.expiry && read.params.session == "default")
        #expect(try RPCCoding.makeDecoder().decode(RPCRequestEnvelope.self, from: encoded).hasID == false, "a notification is not a request")

        let ended = RPCNotification(
            method: SessionEnded.method,
            params: SessionEnded(provider: "corp", session: "default", reason: .loginRequired, message: "Sign in again.")
        )
        let endedRead = try RPCCoding.makeDecoder().decode(RPCNotification<SessionEnded>.self, from: try RPCCoding.makeEncoder().encode(ended))
        #expect(endedRead.method == "session.ended" && endedRead.params.reason == .loginRequired && endedRead.params.message == "Sign in again.")
        #expect(throws: (any Error).self) {
            try RPCCoding.makeDecoder().decode(
                SessionEnded.self,
                from: Data(#"{"provider":"corp","session":"s","reason":"exploded","message":"m"}"#.utf8)
            )
        }
    }

    @Test("the envelope reads what the dispatcher must refuse as it is: another jsonrpc version, none, a null id, a method that is not a string")
    func envelopeReadsWhatIsThere() throws {
        func envelope(_ text: String) throws -> RPCRequestEnvelope {
            try RPCCoding.makeDecoder().decode(RPCRequestEnvelope.self, from: Data(text.utf8))
        }
        #expect(try envelope(#"{"jsonrpc":"1.0","id":1,"method":"token"}"#).jsonrpc == "1.0")
        #expect(try envelope(#"{"id":1,"method":"token"}"#).jsonrpc == nil)
        #expect(try envelope(#"{"jsonrpc":2.0,"id":1,"method":"token"}"#).jsonrpc == nil, "a number is not the version string")
        let nullID = try envelope(#"{"jsonrpc":"2.0","id":null,"method":"token"}"#)
        #expect(nullID.hasID && nullID.id == nil, "a request with a null id is answered, unlike a notification")
        #expect(try envelope(#"{"jsonrpc":"2.0","id":1,"method":7}"#).method == nil)
        #expect(throws: (any Error).self, "not JSON") { try envelope(#"{"jsonrpc":"2.0","id":1,"#) }
        #expect(throws: (any Error).self, "not an object") { try envelope(#"["jsonrpc"]"#) }
    }

    @Test(
        "a client refuses an answer that is not JSON, names another id, or has neither result nor error",
        arguments: [
            #"{"jsonrpc":"2.0","id":1,"result":"#, "not json at all", #"{"jsonrpc":"2.0","id":2,"result":{}}"#, #"{"jsonrpc":"2.0","id":1}"#,
            #"{"jsonrpc":"2.0","id":"1","result":{}}"#,
        ]
    )
    func refusedAnswers(_ answer: String) {
        do throws(RPCClientError) {
            _ = try RPCConnection.decodeReply(Array(answer.utf8), id: .number(1), as: EmptyResult.self)
            Issue.record("accepted \(answer)")
        } catch {
            guard case .protocolError = error else {
                Issue.record("\(answer): \(error)")
                return
            }
        }
    }

    @Test(
        "the front door's scanner declines what is not exactly a plain call: another jsonrpc version, none, escapes, repeats, a bad number",
        arguments: [
            #"{"id":1,"jsonrpc":"1.0","method":"token","params":{"provider":"corp"}}"#,
            #"{"id":1,"method":"token","params":{"provider":"corp"}}"#,
            #"{"id":1,"jsonrpc":"2.0","jsonrpc":"2.0","method":"token","params":{"provider":"corp"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"provider":"c\u006frp"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"provider":"corp","provider":"x"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"provider":"corp","min_valid_seconds":86401}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"provider":"corp","min_valid_seconds":1.5}}"#,
            #"{"id":01,"jsonrpc":"2.0","method":"token","params":{"provider":"corp"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"status","params":{"provider":"corp"}}"#,
            #"{"id":1,"jsonrpc":"2.0","method":"token","params":{"provider":"corp"}} x"#,
            #"{"id":1,"jsonrpc":"2.0","method":"credential.get","params":{"host":"h","tool":"git","session":"s"}}"#,
        ]
    )
    func scannerDeclines(_ line: String) {
        #expect(Array(line.utf8).withUnsafeBytes { PlainTokenRequest($0) } == nil)
    }

    @Test("the scanner reads a plain call in any key order and spacing, as the decoder would")
    func scannerAccepts() throws {
        let line =
            #" { "params" : { "min_valid_seconds" : 30 , "session" : "w" , "provider" : "corp" } , "method" : "token" , "id" : "a-1" , "jsonrpc" : "2.0" } "#
        let plain = try #require(Array(line.utf8).withUnsafeBytes { PlainTokenRequest($0) })
        #expect(plain.target == .session(provider: "corp", session: "w") && plain.minimumValidity == 30 && plain.id == Array(#""a-1""#.utf8))
        let decoded = try RPCCoding.makeDecoder().decode(ParamsOnly<TokenParams>.self, from: Data(line.utf8)).params
        #expect(decoded.provider == "corp" && decoded.session == "w" && decoded.minValidSeconds == 30)
    }

    @Test("a client refuses an answer line longer than its limit instead of reading on")
    func oversizedAnswer() throws {
        let scratch = try ScratchDirectory()
        let endless = String(repeating: "a", count: RPCCoding.maximumResponseLength + 16 * 1024)
        let daemon = try StandInDaemon(in: scratch.path) { _, _ in endless }
        do {
            _ = try RPCConnection(path: daemon.path).call(.status, StatusParams(), as: EmptyResult.self)
            Issue.record("an oversized answer was read")
        } catch {
            #expect("\(error)".contains("too long"), "\(error)")
        }
    }
}

/// The params of a request line, whatever its other members.
private struct ParamsOnly<Params: Decodable>: Decodable {
    var params: Params
}
