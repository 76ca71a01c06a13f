public import AuthGateCore

extension ErrorReason {
    /// The JSON-RPC error `code` of each reason; one code per reason and back.
    ///
    /// The five standard JSON-RPC 2.0 reasons keep their standard codes; authgate's own
    /// reasons use -32001 … -32099, the range JSON-RPC reserves for servers.
    public var rpcCode: Int {
        switch self {
        case .parseError: -32700
        case .invalidRequest: -32600
        case .methodNotFound: -32601
        case .invalidParams: -32602
        case .internalError: -32603
        case .validationFailed: -32001
        case .unknownProvider: -32002
        case .providerUnavailable: -32003
        case .unsupportedGrant: -32004
        case .invalidCredentials: -32005
        case .userExists: -32006
        case .weakPassword: -32007
        case .loginRequired: -32008
        case .networkError: -32009
        case .serviceUnavailable: -32010
        case .serverError: -32011
        case .permissionDenied: -32012
        case .flowExpired: -32013
        case .rateLimited: -32014
        case .requestTooLarge: -32015
        case .loginPending: -32016
        case .loginCancelled: -32017
        case .dpopRejected: -32018
        case .storageUnavailable: -32019
        case .registrationRefused: -32020
        case .workloadTokenInvalid: -32021
        case .consentDenied: -32022
        }
    }

    /// The reason for a JSON-RPC error code, if it is one of ours.
    public init?(rpcCode: Int) {
        guard let reason = ErrorReason.allCases.first(where: { $0.rpcCode == rpcCode }) else { return nil }
        self = reason
    }
}
