package import AuthGateCore
package import AuthGateRPC
import FoundationEssentials

/// Why a step of the CLI or its tools failed, in one sentence for the user (with the daemon's
/// reason when it has one), and the exit status of its class, which the command ends with: the
/// one error the CLI and AuthGateTools report (`authgate` prints it after "authgate: ").
package struct ToolFailure: Error, CustomStringConvertible {
    package var description: String
    package var status: Int32
    /// The daemon's reason, when the daemon refused a call (the sentence ends with it too).
    package var reason: ErrorReason?
    /// Printed as ArgumentParser prints a usage error (with the command's usage line), for the
    /// arguments a step finds missing only when it runs (no terminal to ask a user name on).
    package var showsUsage = false

    package init(_ description: String, status: Int32) {
        self.description = description
        self.status = status
    }

    /// Arguments a step finds missing when it runs: status 64, printed as a usage error.
    package static func usageError(_ description: String) -> ToolFailure {
        var failure = ToolFailure(description, status: usage)
        failure.showsUsage = true
        return failure
    }

    /// A failed call: the daemon's sentence and reason (and its refused fields, and when to
    /// retry), made safe to print, with the status of the reason's class. With `json`, the
    /// error object also goes to stderr as JSON, for scripts.
    package init(_ error: RPCClientError, json: Bool) {
        switch error {
        case .daemonUnreachable:
            self.init("\(error)", status: Self.daemonUnreachable)
        case .protocolError:
            self.init("\(error)", status: Self.internalError)
        case .remote(let remote):
            if json, let data = try? RPCCoding.makeEncoder().encode(["error": remote]) {
                Terminal.writeError(String(decoding: data, as: UTF8.self) + "\n")
            }
            // The message may quote the provider (its error_description): printed through Terminal.safe.
            var lines = ["\(Terminal.safe(remote.description)) [\(remote.reason.rawValue)]"]
            lines += (remote.data?.fields ?? []).map { "  \(Terminal.safe($0.field)): \(Terminal.safe($0.message))" }
            if let retry = remote.data?.retryAfterSeconds { lines.append("  try again in \(retry) s") }
            self.init(lines.joined(separator: "\n"), status: Self.status(for: remote.reason))
            reason = remote.reason
        }
    }

    // The CLI's exit statuses, one per class of error (documented in `--help` and the README).
    package static let internalError: Int32 = 1
    package static let daemonUnreachable: Int32 = 2
    /// A session needs a sign-in.
    package static let signInRequired: Int32 = 3
    package static let wrongCredentials: Int32 = 4
    package static let inputRefused: Int32 = 5
    package static let providerUnusable: Int32 = 6
    package static let providerFailing: Int32 = 7
    package static let notAllowed: Int32 = 8
    /// `authgate provider test`: the sign-in worked, but a check failed.
    package static let checkFailed: Int32 = 9
    /// Bad arguments (ArgumentParser's `validationFailure`).
    package static let usage: Int32 = 64

    /// The status of a reason's class.
    package static func status(for reason: ErrorReason) -> Int32 {
        switch reason {
        case .internalError, .storageUnavailable: internalError
        case .loginRequired, .flowExpired, .loginPending, .loginCancelled: signInRequired
        case .invalidCredentials: wrongCredentials
        case .parseError, .invalidRequest, .methodNotFound, .invalidParams, .requestTooLarge, .validationFailed,
            .userExists, .weakPassword:
            inputRefused
        case .unknownProvider, .providerUnavailable, .unsupportedGrant, .registrationRefused, .workloadTokenInvalid: providerUnusable
        case .networkError, .serviceUnavailable, .serverError, .dpopRejected: providerFailing
        case .permissionDenied, .rateLimited, .consentDenied: notAllowed
        }
    }
}
