import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// How one RPC method is served: its params type, read with the request in one pass, and the
/// handler that answers with its result type. ``MethodTable/entry(for:)`` has one entry per
/// ``RPCMethod``, so a new method is one case there and one handler in ``MethodHandlers``.
struct MethodEntry: Sendable {
    /// Reads the method's params; `nil` when it takes none or none were sent.
    let readParams: @Sendable (KeyedDecodingContainer<DecodedRequest.ParamsKey>) throws -> (any Sendable)?
    /// Runs the handler on what `readParams` read, and encodes the result.
    let run: @Sendable (MethodHandlers, (any Sendable)?) async throws(AuthGateError) -> Data

    /// A method whose params are required.
    static func withParams<Params: Decodable & Sendable, Result: Encodable & Sendable>(
        _ handler: @escaping @Sendable (MethodHandlers, Params) async throws -> Result
    ) -> MethodEntry {
        MethodEntry(
            readParams: { try $0.decodeIfPresent(Params.self, forKey: .params) },
            run: { handlers, params throws(AuthGateError) in
                // `params` is what readParams above read: of this type, or absent.
                guard let params = params as? Params else {
                    throw AuthGateError(.invalidParams, "This method needs \"params\": an object with at least \"provider\".")
                }
                return try await MethodEntry.answer { try await handler(handlers, params) }
            }
        )
    }

    /// A method whose params may be left out: `absent` stands in.
    static func withOptionalParams<Params: Decodable & Sendable, Result: Encodable & Sendable>(
        absent: Params,
        _ handler: @escaping @Sendable (MethodHandlers, Params) async throws -> Result
    ) -> MethodEntry {
        MethodEntry(
            readParams: { try $0.decodeIfPresent(Params.self, forKey: .params) },
            run: { handlers, params throws(AuthGateError) in
                try await MethodEntry.answer { try await handler(handlers, params as? Params ?? absent) }
            }
        )
    }

    /// A method that takes no params (any sent are ignored).
    static func withoutParams<Result: Encodable & Sendable>(_ handler: @escaping @Sendable (MethodHandlers) async throws -> Result) -> MethodEntry {
        MethodEntry(
            readParams: { _ in nil },
            run: { handlers, _ throws(AuthGateError) in
                try await MethodEntry.answer { try await handler(handlers) }
            }
        )
    }

    /// The handler's result, encoded. Handlers throw only ``AuthGateError``s (their own
    /// declarations say so); the table's closures are inferred as throwing any error.
    static func answer<Result: Encodable>(_ handler: () async throws -> Result) async throws(AuthGateError) -> Data {
        let value: Result
        do {
            value = try await handler()
        } catch let error as AuthGateError {
            throw error
        } catch {
            throw AuthGateError(.internalError, "The request failed unexpectedly.")
        }
        do {
            return try RPCCoding.makeEncoder().encode(value)
        } catch {
            throw AuthGateError(.internalError, "The daemon could not encode its answer.")
        }
    }
}

/// Every RPC method's entry (see docs/RPC.md and docs/rpc.schema.json for what each does).
enum MethodTable {
    static func entry(for method: RPCMethod) -> MethodEntry {
        entries[method] ?? makeEntry(method)
    }

    /// Made once: the entries are closures, the same for every request.
    private static let entries = Dictionary(uniqueKeysWithValues: RPCMethod.allCases.map { ($0, makeEntry($0)) })

    private static func makeEntry(_ method: RPCMethod) -> MethodEntry {
        switch method {
        case .providersList: .withoutParams { await $0.providersList() }
        case .login: .withParams { try await $0.login($1) }
        case .loginBegin: .withParams { try await $0.loginBegin($1) }
        case .loginComplete: .withParams { try await $0.loginComplete($1) }
        case .loginCancel: .withParams { try await $0.loginCancel($1) }
        case .register: .withParams { try await $0.register($1) }
        case .token: .withParams { try await $0.token($1) }
        case .credentialGet: .withParams { try await $0.credentialGet($1) }
        case .tokenRejected: .withParams { try await $0.tokenRejected($1) }
        case .tokenWatch: .withParams { try await $0.tokenWatch($1) }
        case .tokenExchange: .withParams { try await $0.tokenExchange($1) }
        case .dpopProof: .withParams { try await $0.dpopProof($1) }
        case .userinfo: .withParams { try await $0.userinfo($1) }
        case .consentList: .withoutParams { await $0.consentList() }
        case .consentRevoke: .withOptionalParams(absent: ConsentRevokeParams()) { try await $0.consentRevoke($1) }
        case .status: .withOptionalParams(absent: StatusParams()) { try await $0.status($1) }
        case .logout: .withParams { try await $0.logout($1) }
        case .sessionInspect: .withParams { try await $0.sessionInspect($1) }
        case .daemonInfo: .withoutParams { await $0.daemonInfo() }
        case .configReload: .withoutParams { try await $0.configReload() }
        case .providerDiscover: .withParams { try await $0.providerDiscover($1) }
        case .providerRegister: .withParams { try await $0.providerRegister($1) }
        case .providerDeregister: .withParams { try await $0.providerDeregister($1) }
        case .metrics: .withoutParams { try await $0.metrics() }
        case .storageRekey: .withoutParams { try await $0.storageRekey() }
        }
    }
}
