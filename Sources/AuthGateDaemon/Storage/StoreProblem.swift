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
    /// The file could not be read now and is left as it is, to be read again before any save
    /// of its uid: its sessions are not lost, only out of reach for now.
    var keptUnread = false

    var description: String {
        "\(file): \(reason)" + (movedTo.map { " (moved to \($0))" } ?? "")
    }
}
