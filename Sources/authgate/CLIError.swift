import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A failed call, printed as one sentence with its reason, and the exit status of its class.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    let exitCode: ExitCode

    init(message: String, exitCode: ExitCode) {
        self.message = message
        self.exitCode = exitCode
    }

    init(_ error: RPCClientError, json: Bool) {
        switch error {
        case .daemonUnreachable:
            self.init(message: "\(error)", exitCode: ExitStatus.daemonUnreachable)
        case .protocolError:
            self.init(message: "\(error)", exitCode: ExitStatus.internalError)
        case .remote(let remote):
            if json, let data = try? RPCCoding.makeEncoder().encode(["error": remote]) {
                Terminal.writeError(String(decoding: data, as: UTF8.self) + "\n")
            }
            // The message may quote the provider (its error_description): printed through Terminal.safe.
            var lines = ["\(Terminal.safe(remote.description)) [\(remote.reason.rawValue)]"]
            lines += (remote.data?.fields ?? []).map { "  \(Terminal.safe($0.field)): \(Terminal.safe($0.message))" }
            if let retry = remote.data?.retryAfterSeconds { lines.append("  try again in \(retry) s") }
            self.init(message: lines.joined(separator: "\n"), exitCode: ExitStatus.forReason(remote.reason))
        }
    }

    /// A tool's failure (``ToolFailure``), with its status.
    init(_ failure: ToolFailure) {
        self.init(message: failure.description, exitCode: ExitCode(failure.status))
    }

    var description: String { message }

    /// Prints the message on stderr and exits with the class's status.
    static func exit(_ error: CLIError) -> Never {
        Terminal.writeError("authgate: \(error.message)\n")
        Glibc.exit(error.exitCode.rawValue)
    }
}

/// The CLI's exit statuses, one per class of error (documented in `--help` and the README).
enum ExitStatus {
    static let internalError = ExitCode(1)
    static let daemonUnreachable = ExitCode(2)
    static let signInRequired = ExitCode(3)
    static let wrongCredentials = ExitCode(4)
    static let inputRefused = ExitCode(5)
    static let providerUnusable = ExitCode(6)
    static let providerFailing = ExitCode(7)
    static let notAllowed = ExitCode(8)
    /// `authgate provider test`: the sign-in worked, but a check failed.
    static let checkFailed = ExitCode(9)

    static func forReason(_ reason: ErrorReason) -> ExitCode {
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
