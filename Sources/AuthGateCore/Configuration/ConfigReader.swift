import FoundationEssentials

/// Collects the problems of one file while its reader walks the document.
final class ProblemCollector {
    let file: String
    private(set) var problems: [ConfigProblem] = []
    /// The keys each object read so far may have, by JSON path with array indices as `[]`:
    /// what the readers accept, as they check it (the JSON Schema's test reads it).
    private(set) var acceptedKeys: [String: Set<String>] = [:]

    init(file: String) {
        self.file = file
    }

    func add(_ path: String, _ message: String) {
        problems.append(ConfigProblem(file: file, path: path, message: message))
    }

    func accept(_ keys: Set<String>, at path: String) {
        let general = path.replacing(/\[[0-9]+\]/, with: "[]")
        acceptedKeys[general, default: []].formUnion(keys)
    }
}

/// Reads one JSON object strictly: every key must be read by someone, types must match, and
/// each problem is recorded with its JSON path instead of aborting the whole file.
struct ObjectReader {
    let path: String
    private let object: [String: JSONValue]
    private let problems: ProblemCollector

    /// Returns `nil` (and records a problem) when `value` is not an object.
    init?(_ value: JSONValue, path: String, problems: ProblemCollector) {
        guard case .object(let object) = value else {
            problems.add(path, "expected an object, found \(value.typeName)")
            return nil
        }
        self.path = path
        self.object = object
        self.problems = problems
    }

    func childPath(_ key: String) -> String { "\(path).\(key)" }

    /// Records every key not in `allowed`; unknown keys are almost always typos.
    func rejectUnknownKeys(allowed: Set<String>, context: String) {
        problems.accept(allowed, at: path)
        for key in object.keys.sorted() where !allowed.contains(key) {
            let hint = allowed.sorted().first { candidate in
                candidate.lowercased() == key.lowercased() || editDistance(candidate, key) <= 2
                    || (min(candidate.count, key.count) >= 4 && (candidate.hasPrefix(key) || key.hasPrefix(candidate)))
            }
            let suggestion = hint.map { " (did you mean \"\($0)\"?)" } ?? ""
            problems.add(childPath(key), "unknown key for \(context)\(suggestion)")
        }
    }

    func contains(_ key: String) -> Bool { object[key] != nil }

    /// The object's keys, sorted.
    var keys: [String] { object.keys.sorted() }

    func raw(_ key: String) -> JSONValue? { object[key] }

    func missing(_ key: String, _ what: String) {
        problems.add(childPath(key), "required: \(what)")
    }

    func string(_ key: String, required: String? = nil) -> String? {
        guard let value = object[key] else {
            if let required { missing(key, required) }
            return nil
        }
        guard case .string(let string) = value else {
            problems.add(childPath(key), "expected a string, found \(value.typeName)")
            return nil
        }
        if string.isEmpty {
            problems.add(childPath(key), "must not be empty")
            return nil
        }
        return string
    }

    func bool(_ key: String) -> Bool? {
        guard let value = object[key] else { return nil }
        guard case .bool(let bool) = value else {
            problems.add(childPath(key), "expected true or false, found \(value.typeName)")
            return nil
        }
        return bool
    }

    func integer(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let value = object[key] else { return nil }
        return Self.integer(value, path: childPath(key), in: range, problems: problems)
    }

    static func integer(_ value: JSONValue, path: String, in range: ClosedRange<Int>, problems: ProblemCollector) -> Int? {
        guard case .number(let number) = value, number.rounded() == number, abs(number) < 1e15 else {
            problems.add(path, "expected an integer, found \(value.typeName)")
            return nil
        }
        guard range.contains(Int(number)) else {
            problems.add(path, "must be between \(range.lowerBound) and \(range.upperBound)")
            return nil
        }
        return Int(number)
    }

    func object(_ key: String) -> ObjectReader? {
        guard let value = object[key] else { return nil }
        return ObjectReader(value, path: childPath(key), problems: problems)
    }

    /// Reads an array, giving each element and its path to `element`; `nil` elements are dropped.
    func array<T>(_ key: String, element: (JSONValue, String) -> T?) -> [T]? {
        guard let value = object[key] else { return nil }
        guard case .array(let items) = value else {
            problems.add(childPath(key), "expected an array, found \(value.typeName)")
            return nil
        }
        return items.enumerated().compactMap { index, item in element(item, "\(childPath(key))[\(index)]") }
    }

    func stringArray(_ key: String) -> [String]? {
        array(key) { item, itemPath in
            guard case .string(let string) = item, !string.isEmpty else {
                problems.add(itemPath, "expected a non-empty string, found \(item.typeName)")
                return nil
            }
            return string
        }
    }

    /// Reads a string that must be one of `choices`.
    func choice<T: RawRepresentable<String>>(_ key: String, as: T.Type, required: Bool = false) -> T? where T: CaseIterable {
        let allowed = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        guard let string = string(key, required: required ? "one of \(allowed)" : nil) else { return nil }
        guard let value = T(rawValue: string) else {
            problems.add(childPath(key), "expected one of \(allowed), found \"\(string)\"")
            return nil
        }
        return value
    }

    func add(_ key: String, _ message: String) {
        problems.add(childPath(key), message)
    }
}

/// Levenshtein distance, only to suggest the intended key for a typo.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
