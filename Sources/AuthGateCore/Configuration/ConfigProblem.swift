/// One problem in one provider file, located by its JSON path.
///
/// Its description reads `providers.d/corp.json: $.endpoints.token: must be an https URL`.
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    /// The file as the admin named it (directory as given + file name).
    public var file: String
    /// A JSON path such as `$.endpoints.token` or `$.users[1].password`; `$` for the document.
    public var path: String
    /// What was expected, for a person.
    public var message: String

    public init(file: String, path: String, message: String) {
        self.file = file
        self.path = path
        self.message = message
    }

    public var description: String { "\(file): \(path): \(message)" }
}
