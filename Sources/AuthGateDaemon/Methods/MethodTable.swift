import AuthGateCore
import AuthGateRPC
import FoundationEssentials

/// How one RPC method is served: its params type, read with the request in one pass, and the
/// handler that answers with its result type. ``MethodTable/entry(for:)`` has one entry per
/// ``RPCMethod``, so a new method is one case there and one handler in a part of
/// ``MethodHandlers``.
struct MethodEntry: Sendable {
    /// Reads the method's params; `nil` when it takes none or none were sent.
    let readParams: @Sendable (KeyedDecodingContainer<DecodedRequest.ParamsKey>) throws -> (any Sendable)?
    /// Runs the handler on what `readParams` read, for the caller, and encodes the result.
    let run: @Sendable (MethodHandlers, (any Sendable)?, MethodCaller) async throws(AuthGateError) -> Data

    /// A method whose params are required.
    static func withParams<Params: Decodable & Sendable, Result: Encodable & Sendable>(
        _ handler: @escaping @Sendable (MethodHandlers, Params, MethodCaller) async throws -> Result
    ) -> MethodEntry {
        MethodEntry(
            readParams: { try $0.decodeIfPresent(Params.self, forKey: .params) },
            run: { handlers, params, caller throws(AuthGateError) in
                // `params` is what readParams above read: of this type, or absent.
                guard let params = params as? Params else {
                    throw AuthGateError(.invalidParams, "This method needs \"params\": an object with at least \"provider\".")
                }
                return try await MethodEntry.answer { try await handler(handlers, params, caller) }
            }
        )
    }

    /// A method whose params may be left out: `absent` stands in.
    static func withOptionalParams<Params: Decodable & Sendable, Result: Encodable & Sendable>(
        absent: Params,
        _ handler: @escaping @Sendable (MethodHandlers, Params, MethodCaller) async throws -> Result
    ) -> MethodEntry {
        MethodEntry(
            readParams: { try $0.decodeIfPresent(Params.self, forKey: .params) },
            run: { handlers, params, caller throws(AuthGateError) in
                try await MethodEntry.answer { try await handler(handlers, params as? Params ?? absent, caller) }
            }
        )
    }

    /// A method that takes no params (any sent are ignored).
    static func withoutParams<Result: Encodable & Sendable>(
        _ handler: @escaping @Sendable (MethodHandlers, MethodCaller) async throws -> Result
    ) -> MethodEntry {
        MethodEntry(
            readParams: { _ in nil },
            run: { handlers, _, caller throws(AuthGateError) in
                try await MethodEntry.answer { try await handler(handlers, caller) }
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
        case .providersList: .withoutParams { await $0.daemon.providersList(from: $1) }
        case .login: .withParams { try await $0.signIn.login($1, from: $2) }
        case .loginBegin: .withParams { try await $0.signIn.loginBegin($1, from: $2) }
        case .loginComplete: .withParams { try await $0.signIn.loginComplete($1, from: $2) }
        case .loginCancel: .withParams { try await $0.signIn.loginCancel($1, from: $2) }
        case .register: .withParams { try await $0.signIn.register($1, from: $2) }
        case .token: .withParams { try await $0.tokens.token($1, from: $2) }
        case .credentialGet: .withParams { try await $0.tokens.credentialGet($1, from: $2) }
        case .tokenRejected: .withParams { try await $0.tokens.tokenRejected($1, from: $2) }
        case .tokenWatch: .withParams { try await $0.tokens.tokenWatch($1, from: $2) }
        case .tokenExchange: .withParams { try await $0.tokens.tokenExchange($1, from: $2) }
        case .dpopProof: .withParams { try await $0.tokens.dpopProof($1, from: $2) }
        case .userinfo: .withParams { try await $0.sessions.userinfo($1, from: $2) }
        case .consentList: .withoutParams { await $0.consent.consentList(from: $1) }
        case .consentRevoke: .withOptionalParams(absent: ConsentRevokeParams()) { try await $0.consent.consentRevoke($1, from: $2) }
        case .status: .withOptionalParams(absent: StatusParams()) { try await $0.sessions.status($1, from: $2) }
        case .logout: .withParams { try await $0.sessions.logout($1, from: $2) }
        case .sessionInspect: .withParams { try await $0.sessions.sessionInspect($1, from: $2) }
        case .daemonInfo: .withoutParams { await $0.daemon.daemonInfo(from: $1) }
        case .configReload: .withoutParams { try await $0.admin.configReload(from: $1) }
        case .providerDiscover: .withParams { try await $0.registration.providerDiscover($1, from: $2) }
        case .providerRegister: .withParams { try await $0.registration.providerRegister($1, from: $2) }
        case .providerDeregister: .withParams { try await $0.registration.providerDeregister($1, from: $2) }
        case .metrics: .withoutParams { try await $0.admin.metrics(from: $1) }
        case .storageRekey: .withoutParams { try await $0.admin.storageRekey(from: $1) }
        }
    }
}
