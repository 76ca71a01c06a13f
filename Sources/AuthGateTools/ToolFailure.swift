/// Why a tool's step failed, in one sentence for the user, with the exit status the command
/// ends with (`authgate` prints it as any error: ``CLIError``).
package struct ToolFailure: Error, CustomStringConvertible {
    package var description: String
    package var status: Int32

    package init(_ description: String, status: Int32) {
        self.description = description
        self.status = status
    }

    /// The CLI's statuses that the tools end with (README: exit statuses).
    package static let internalError: Int32 = 1
    /// A session needs a sign-in.
    package static let signInRequired: Int32 = 3
    /// Bad arguments (ArgumentParser's `validationFailure`).
    package static let usage: Int32 = 64
}
