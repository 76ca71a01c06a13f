/// A sessions file that could not be used, as `loadAll` reports it.
struct StoreProblem: Error, Equatable, CustomStringConvertible {
    /// Whose file it was; `nil` for a problem with the sessions directory itself.
    var uid: UInt32?
    /// The file (or directory) concerned.
    var file: String
    /// What is wrong, as a sentence; never contains a token.
    var reason: String
    /// Where the file was moved so that the next save starts clean, if it was.
    var movedTo: String?

    var description: String {
        "\(file): \(reason)" + (movedTo.map { " (moved to \($0))" } ?? "")
    }
}
