import ArgumentParser
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
        self.init(ToolFailure(error, json: json))
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

/// The CLI's exit statuses as ArgumentParser's ``ExitCode`` (``ToolFailure`` has them, documented
/// in `--help` and the README).
enum ExitStatus {
    static let internalError = ExitCode(ToolFailure.internalError)
    static let inputRefused = ExitCode(ToolFailure.inputRefused)
    static let providerUnusable = ExitCode(ToolFailure.providerUnusable)
    static let checkFailed = ExitCode(ToolFailure.checkFailed)
}
