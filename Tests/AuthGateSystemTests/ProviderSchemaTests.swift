import AuthGateCore
import AuthGateTestSupport
import Foundation
import Testing

/// docs/provider.schema.json kept in step with the loader: the keys come from the loader as it
/// checks them (``ProviderConfigurationLoader/acceptedKeys(in:)``), never from a copy, and the
/// schema is run by jsonschema (Tests/idp/schema_errors.py) and by `check-jsonschema`.
@Suite("The provider file JSON Schema")
struct ProviderSchemaTests {
    static let schemaPath = LoopbackServer.repository.appendingPathComponent("docs/provider.schema.json").path
    static let types = ["oidc", "oauth2", "mock"]

    /// A provider document of `type` with every object and array of objects the loader reads
    /// present, found by trying `{}` and `[{}]` for each key the loader accepts until no new
    /// object appears; and the keys the loader accepts in each.
    static func exploredKeys(type: String) throws -> [String: Set<String>] {
        var document: Any = ["type": type]
        var tried: Set<String> = []
        var accepted = try keys(of: document)
        var grew = true
        while grew {
            grew = false
            for (path, names) in accepted.sorted(by: { $0.key < $1.key }) {
                for name in names.sorted() where tried.insert("\(path).\(name)").inserted {
                    for candidate in [[String: Any]() as Any, [[String: Any]()] as Any] {
                        let trial = setting(candidate, at: components(path) + [name], in: document)
                        let more = try keys(of: trial)
                        if more.count > accepted.count {
                            (document, accepted, grew) = (trial, more, true)
                            break
                        }
                    }
                }
            }
        }
        return accepted
    }

    static func keys(of document: Any) throws -> [String: Set<String>] {
        ProviderConfigurationLoader.acceptedKeys(in: try JSONSerialization.data(withJSONObject: document))
    }

    /// `$.users[].email` → `["users", "[]", "email"]`.
    static func components(_ path: String) -> [String] {
        path.split(separator: ".").dropFirst().flatMap { part in
            part.hasSuffix("[]") ? [String(part.dropLast(2)), "[]"] : [String(part)]
        }
    }

    /// `document` with `value` at `path` (`[]` is an array's first element), creating what is missing.
    static func setting(_ value: Any, at path: [String], in document: Any) -> Any {
        guard let first = path.first else { return value }
        let rest = Array(path.dropFirst())
        if first == "[]" {
            var array = document as? [Any] ?? []
            let element = array.first ?? [String: Any]()
            if array.isEmpty { array.append(element) }
            array[0] = setting(value, at: rest, in: element)
            return array
        }
        var object = document as? [String: Any] ?? [:]
        object[first] = setting(value, at: rest, in: object[first] ?? (rest.first == "[]" ? [Any]() as Any : [String: Any]() as Any))
        return object
    }

    /// The schema node that describes the object at `path` for a document of `type`.
    static func schemaProperties(_ schema: [String: Any], path: [String], type: String) -> Set<String>? {
        if path.isEmpty {
            // The root's keys depend on the type: the allOf branch whose `if` names it.
            let branches = schema["allOf"] as? [[String: Any]] ?? []
            for branch in branches {
                let condition = ((branch["if"] as? [String: Any])?["properties"] as? [String: Any])?["type"] as? [String: Any]
                let named = (condition?["enum"] as? [String]) ?? [(condition?["const"] as? String) ?? ""]
                if named.contains(type), let names = ((branch["then"] as? [String: Any])?["propertyNames"] as? [String: Any])?["enum"] as? [String] {
                    return Set(names)
                }
            }
            return nil
        }
        var node: [String: Any]? = schema
        for component in path {
            node = component == "[]" ? node?["items"] as? [String: Any] : (node?["properties"] as? [String: Any])?[component] as? [String: Any]
        }
        return (node?["properties"] as? [String: Any]).map { Set($0.keys) }
    }

    static func loadSchema() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: schemaPath))) as? [String: Any])
    }

    /// The error paths of each document, from jsonschema's Draft 2020-12 validator.
    static func schemaErrors(_ documents: [Any]) throws -> [[String]] {
        let input = String(decoding: try JSONSerialization.data(withJSONObject: documents), as: UTF8.self)
        let script = LoopbackServer.repository.appendingPathComponent("Tests/idp/schema_errors.py").path
        let result = try run(URL(fileURLWithPath: LoopbackServer.python), [script, schemaPath], stdin: input)
        guard result.status == 0, let errors = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String]],
            errors.count == documents.count
        else {
            throw TestFailure("schema_errors.py failed (\(result.status)): \(result.stderr)")
        }
        return errors
    }

    /// Every file that should be a valid provider: the examples and the test fixtures.
    static func exampleFiles() throws -> [URL] {
        let root = LoopbackServer.repository
        let directories = [root.appendingPathComponent("providers.d"), root.appendingPathComponent("Tests/AuthGateCoreTests/Fixtures")]
        return try directories.flatMap { directory in
            try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
                .filter { $0.lastPathComponent.hasSuffix(".json") || $0.lastPathComponent.hasSuffix(".json.example") }
        }.sorted { $0.path < $1.path }
    }

    @Test("every key the loader accepts, in every object, is in the schema, and no other", arguments: types)
    func keysMatch(_ type: String) throws {
        let schema = try Self.loadSchema()
        let accepted = try Self.exploredKeys(type: type)
        #expect(accepted.count >= (type == "mock" ? 5 : 8), "the exploration found the nested objects: \(accepted.keys.sorted())")
        for (path, names) in accepted {
            let described = Self.schemaProperties(schema, path: Self.components(path), type: type)
            #expect(described == names, "\(type) \(path): the loader accepts \(names.sorted()), the schema describes \(described?.sorted() ?? [])")
        }
    }

    @Test("every example provider file and fixture is valid for the loader and for the schema")
    func examplesValidate() throws {
        let files = try Self.exampleFiles()
        #expect(files.count >= 6)
        var documents: [Any] = []
        for file in files {
            let data = try Data(contentsOf: file)
            let report = ProviderConfigurationLoader.parse(data, id: "example", file: file.lastPathComponent)
            #expect(report.configuration != nil, "\(file.lastPathComponent): \(report.problems)")
            documents.append(try JSONSerialization.jsonObject(with: data))
        }
        for (file, errors) in zip(files, try Self.schemaErrors(documents)) {
            #expect(errors.isEmpty, "\(file.lastPathComponent): \(errors)")
        }
    }

    /// A valid document of each type to break one key at a time.
    static func validBase(_ type: String) throws -> Any {
        let name = ["oidc": "oidc-full", "oauth2": "oauth2-minimal", "mock": "mock-full"][type]!
        let url = LoopbackServer.repository.appendingPathComponent("Tests/AuthGateCoreTests/Fixtures/\(name).json")
        return try JSONSerialization.jsonObject(with: Data(contentsOf: url))
    }

    @Test("every value the loader refuses for its type, at every key, the schema refuses at that key")
    func typeErrorsAgree() throws {
        let wrongValues: [Any] = ["x", 5, 1.5, true, [String: Any](), [Any](), NSNull()]
        var documents: [Any] = []
        var cases: [String] = []
        for type in Self.types {
            let base = try Self.validBase(type)
            for (path, names) in try Self.exploredKeys(type: type) {
                for name in names.sorted() where name != "type" {
                    for value in wrongValues {
                        let document = Self.setting(value, at: Self.components(path) + [name], in: base)
                        let concrete = "\(path).\(name)".replacing("[]", with: "[0]")
                        let report = ProviderConfigurationLoader.parse(try JSONSerialization.data(withJSONObject: document), id: "x", file: "x.json")
                        if report.problems.contains(where: { $0.path == concrete && $0.message.hasPrefix("expected") }) {
                            documents.append(document)
                            cases.append(concrete)
                        }
                    }
                }
            }
        }
        #expect(cases.count > 150, "type errors tried: \(cases.count)")
        for (concrete, errors) in zip(cases, try Self.schemaErrors(documents)) {
            #expect(errors.contains(concrete), "the loader refuses the type at \(concrete); the schema's errors: \(errors)")
        }
    }

    @Test("check-jsonschema, as an admin's CI runs it, accepts providers.d/*.json* and refuses a broken file")
    func checkJSONSchema() throws {
        let tool = URL(fileURLWithPath: LoopbackServer.python).deletingLastPathComponent().appendingPathComponent("check-jsonschema")
        let examples = try FileManager.default.contentsOfDirectory(atPath: LoopbackServer.repository.appendingPathComponent("providers.d").path)
            .filter { $0.hasSuffix(".json") || $0.hasSuffix(".json.example") }
            .map { LoopbackServer.repository.appendingPathComponent("providers.d/\($0)").path }
        let accepted = try run(tool, ["--schemafile", Self.schemaPath, "--default-filetype", "json"] + examples)
        #expect(accepted.status == 0, "\(accepted.stdout) \(accepted.stderr)")

        let scratch = try ScratchDirectory()
        let broken = scratch.path + "/broken.json"
        try Data(#"{"type": "oidc", "issuer": "https://sso.example.com", "client_id": "a", "grants": ["device_code"], "expires_in_default": "soon"}"#.utf8)
            .write(to: URL(fileURLWithPath: broken))
        let refused = try run(tool, ["--schemafile", Self.schemaPath, broken])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("$.expires_in_default"), "\(refused.stdout)")
    }

    @Test(
        "provider add names the installed schema in \"$schema\" (a file:// URL beside the binary's PREFIX/bin), which validates the file; nothing when it is not installed"
    )
    func schemaReference() throws {
        let scratch = try ScratchDirectory()
        let prefix = scratch.path + "/prefix"
        let documentation = prefix + "/share/doc/authgate"
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: documentation, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: BuiltProducts.cli.path, toPath: prefix + "/bin/authgate")
        let add = ["provider", "add", "gh", "--providers-dir", scratch.path, "--preset", "github", "--client-id", "Iv1.abc", "--dry-run"]

        let withoutSchema = try run(URL(fileURLWithPath: prefix + "/bin/authgate"), add)
        #expect(withoutSchema.status == 0 && !withoutSchema.stdout.contains("$schema"), "\(withoutSchema)")
        try FileManager.default.copyItem(atPath: Self.schemaPath, toPath: documentation + "/provider.schema.json")
        let written = try run(URL(fileURLWithPath: prefix + "/bin/authgate"), add)
        let file = try #require(try JSONSerialization.jsonObject(with: Data(written.stdout.utf8)) as? [String: Any], "\(written)")
        let reference = try #require(file["$schema"] as? String)
        #expect(reference == "file://" + documentation + "/provider.schema.json")
        #expect(!(try String(contentsOfFile: Self.schemaPath, encoding: .utf8)).contains("authgate.example"), "no placeholder $id")
        let path = scratch.path + "/gh.json"
        try Data(written.stdout.utf8).write(to: URL(fileURLWithPath: path))
        let tool = URL(fileURLWithPath: LoopbackServer.python).deletingLastPathComponent().appendingPathComponent("check-jsonschema")
        let checked = try run(tool, ["--schemafile", String(reference.dropFirst("file://".count)), path])
        #expect(checked.status == 0, "\(checked.stdout) \(checked.stderr)")
    }
}
