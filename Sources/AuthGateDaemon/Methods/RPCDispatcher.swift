import AuthGateCore
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOCore

/// Answers one JSON-RPC line: decodes it, runs the method for the caller, encodes the answer.
/// The socket server's ``RequestResponder``: every line its cached path does not answer.
///
/// Errors a user can hit become JSON-RPC errors with a stable `data.reason`; anything else
/// becomes `internal_error` and is logged (without secrets: errors never carry them).
struct RPCDispatcher: RequestResponder {
    let methods: MethodHandlers
    /// Where each request is counted and timed; `nil` where nothing is.
    var metrics: DaemonMetrics?
    let logger: Logger

    /// The response line (with its `\n`), or `nil` for a notification.
    /// - Parameter watchSink: Where `token.watch` sends its notifications (the connection).
    func respond(to line: Data, from caller: PeerCredentials, watchSink: WatchSink? = nil) async -> Data? {
        guard let metrics else { return await answer(line, from: caller, watchSink: watchSink).line }
        let start = ContinuousClock.now
        let (answer, method, outcome) = await answer(line, from: caller, watchSink: watchSink)
        metrics.rpcRequest(method: method?.rawValue ?? DaemonMetrics.unknownMethod, outcome: outcome, duration: .now - start)
        return answer
    }

    /// The answer line, the method (`nil` when the line names none the daemon has), and the
    /// error's reason, if it failed.
    private func answer(_ line: Data, from caller: PeerCredentials, watchSink: WatchSink?) async -> (line: Data?, RPCMethod?, ErrorReason?) {
        let request: DecodedRequest
        do {
            request = try RPCCoding.makeDecoder().decode(DecodedRequest.self, from: line)
        } catch DecodingError.typeMismatch {
            let isBatch = line.first(where: { !$0.isJSONWhitespace }) == UInt8(ascii: "[")
            return (
                encodeError(
                    AuthGateError(
                        .invalidRequest,
                        isBatch
                            ? "Batch requests are not supported; send one request per line."
                            : "A request must be a JSON object."
                    ),
                    id: nil
                ), nil, .invalidRequest
            )
        } catch {
            return (encodeError(AuthGateError(.parseError, "The request is not valid JSON."), id: nil), nil, .parseError)
        }
        let envelope = request.envelope
        guard envelope.jsonrpc == "2.0" else {
            return (encodeError(AuthGateError(.invalidRequest, "The request must have \"jsonrpc\": \"2.0\"."), id: envelope.id), nil, .invalidRequest)
        }
        guard let methodName = envelope.method else {
            return (encodeError(AuthGateError(.invalidRequest, "The request has no \"method\" string."), id: envelope.id), nil, .invalidRequest)
        }
        let response: Result<Data, AuthGateError>
        let method = RPCMethod(rawValue: methodName)
        if let method {
            response = await run(method, request, caller: caller, watchSink: watchSink)
        } else {
            response = .failure(AuthGateError(.methodNotFound, "There is no method \"\(methodName.prefix(64))\"."))
        }
        let reason: ErrorReason? = if case .failure(let error) = response { error.reason } else { nil }
        guard envelope.hasID else { return (nil, method, reason) }
        switch response {
        case .success(let result):
            return (encodeSuccess(result, id: envelope.id), method, nil)
        case .failure(let error):
            logger.debug(
                "request failed",
                metadata: [
                    "rpc.method": "\(methodName.prefix(64))", "peer.uid": "\(caller.uid)",
                    "error.reason": "\(error.reason.rawValue)",
                ]
            )
            return (encodeError(error, id: envelope.id), method, error.reason)
        }
    }

    private func run(_ method: RPCMethod, _ request: DecodedRequest, caller: PeerCredentials, watchSink: WatchSink?) async -> Result<Data, AuthGateError> {
        let caller = MethodCaller(credentials: caller, watchSink: watchSink)
        do throws(AuthGateError) {
            return .success(try await MethodTable.entry(for: method).run(methods, request.params.get(), caller))
        } catch {
            return .failure(error)
        }
    }

    /// A sentence naming the offending field, without echoing its value (it may be a secret).
    static func explain(_ error: DecodingError) -> String {
        func name(_ path: [any CodingKey]) -> String {
            let keys = path.map(\.stringValue).filter { $0 != "params" }
            return keys.isEmpty ? "params" : "\"\(keys.joined(separator: "."))\""
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(name(context.codingPath + [key])) is required."
        case .typeMismatch(let type, let context):
            return "\(name(context.codingPath)) must be \(Self.typeName(type))."
        case .valueNotFound(let type, let context):
            return "\(name(context.codingPath)) must be \(Self.typeName(type)), not null."
        case .dataCorrupted(let context):
            return "\(name(context.codingPath)) has a value that is not allowed."
        @unknown default:
            return "The params cannot be read."
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Double.Type: "a number"
        case is [String].Type, is [Any].Type: "an array"
        default: "an object"
        }
    }

    private func encodeSuccess(_ result: Data, id: RPCID?) -> Data {
        // The result is already JSON; spliced in rather than decoded and encoded again.
        let idJSON: Data = (try? RPCCoding.makeEncoder().encode(id)) ?? Data("null".utf8)
        var line = ByteBuffer()
        line.reserveCapacity(idJSON.count + result.count + RPCLine.successFramingLength)
        RPCLine.success(id: idJSON, result: result, into: &line)
        return Data(line.readableBytesView)
    }

    private func encodeError(_ error: AuthGateError, id: RPCID?) -> Data {
        Data(RPCLine.error(error, id: id))
    }
}

/// A request line decoded in one pass: the envelope, and the params as its method's type.
///
/// Reading `method` first inside one `init(from:)`, then the params through the method's
/// ``MethodTable`` entry, parses the line once; parsing it twice was a measurable share of a
/// `token` call's CPU through the dispatcher (docs/BENCHMARKS.md, "What was optimised").
struct DecodedRequest: Decodable {
    var envelope: RPCRequestEnvelope
    /// `nil` when the method takes none or none were sent (absent or null); a failure names
    /// the field the method's type could not read.
    var params: Result<(any Sendable)?, AuthGateError>

    enum ParamsKey: String, CodingKey { case params }

    init(from decoder: any Decoder) throws {
        envelope = try RPCRequestEnvelope(from: decoder)
        guard let method = envelope.method.flatMap(RPCMethod.init(rawValue:)) else {
            params = .success(nil)
            return
        }
        do {
            params = .success(try MethodTable.entry(for: method).readParams(decoder.container(keyedBy: ParamsKey.self)))
        } catch let error as DecodingError {
            params = .failure(AuthGateError(.invalidParams, RPCDispatcher.explain(error)))
        } catch {
            params = .failure(AuthGateError(.invalidParams, "The params cannot be read."))
        }
    }
}
