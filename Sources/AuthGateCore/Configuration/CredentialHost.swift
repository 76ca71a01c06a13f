/// The hosts credential helpers are asked about: `host` or `host:port` (git sends
/// `host=git.example.com:8443`; docker a server URL, with or without `https://`).
public enum CredentialHost {
    /// `host[:port]` lowercased, or `nil` when `text` is not one: a DNS name or an IPv4
    /// address (letters, digits, `-` and `.`, at most 253), or a bracketed IPv6 address, then
    /// an optional port 1–65535; no scheme, user, path, query or spaces.
    public static func normalize(_ text: String) -> String? {
        let lower = text.lowercased()
        guard !lower.isEmpty, lower.utf8.count <= 300 else { return nil }
        var host = Substring(lower)
        var port: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let address = host[host.index(after: host.startIndex)..<close]
            guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
            let rest = host[host.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
            host = host[...close]
        } else {
            let parts = host.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            host = parts[0]
            port = parts.count == 2 ? parts[1] : nil
            guard !host.isEmpty, host.utf8.count <= 253,
                host.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "." }),
                !host.hasPrefix("."), !host.hasPrefix("-")
            else { return nil }
        }
        if let port {
            guard let number = Int(port), (1...65_535).contains(number), String(number) == port else { return nil }
            return "\(host):\(number)"
        }
        return String(host)
    }

    /// Whether two normalized hosts name the same HTTPS server: equal, or equal once the
    /// scheme's default port (`:443`) is left out (`example.com:443` is `example.com`).
    public static func sameHost(_ one: String, _ other: String) -> Bool {
        func withoutDefaultPort(_ host: String) -> Substring {
            host.hasSuffix(":443") ? host.dropLast(4) : Substring(host)
        }
        return withoutDefaultPort(one) == withoutDefaultPort(other)
    }

    /// git's credential protocol: `key=value` lines up to a blank line; a line without `=` is
    /// skipped, and a key given twice keeps its last value — except a multi-valued key, whose
    /// name ends in `[]` (`capability[]`, `wwwauth[]`): it keeps every value, one per line.
    /// The lines are an array, not any sequence: a generic sequence's conformances are looked
    /// up at run time in the credential helper, a whole process git runs before each request,
    /// and each lookup scans every conformance of the static binary (docs/BENCHMARKS.md).
    public static func gitAttributes(_ lines: [String]) -> [String: String] {
        var attributes: [String: String] = [:]
        for line in lines {
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<equals])
            let value = String(line[line.index(after: equals)...])
            if key.hasSuffix("[]"), let earlier = attributes[key] {
                attributes[key] = earlier + "\n" + value
            } else {
                attributes[key] = value
            }
        }
        return attributes
    }

    /// A `credential_helper.paths` entry as matching uses it: without a leading `/` and ending
    /// in one (`org-a`, `/org-a/` and `org-a/` are all `org-a/`), so it matches whole segments;
    /// `nil` when it is not one: empty (or only `/`), over 1000 bytes, with an empty, `.` or `..`
    /// segment, or with a space, a control character, `?`, `#` or a backslash.
    public static func pathPrefix(_ text: String) -> String? {
        var trimmed = Substring(text)
        while trimmed.hasPrefix("/") { trimmed = trimmed.dropFirst() }
        if trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard !trimmed.isEmpty, trimmed.utf8.count <= 1000, isPath(trimmed) else { return nil }
        return trimmed + "/"
    }

    /// Whether `path` is segments of printable characters, none empty, `.` or `..`.
    private static func isPath(_ path: Substring) -> Bool {
        path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { $0 != "" && $0 != "." && $0 != ".." }
            && path.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7F && $0 != "?" && $0 != "#" && $0 != "\\" }
    }

    /// Which provider's `credential_helper` answers a request.
    public enum Selection: Sendable, Equatable {
        /// The helper at this index in the list given; `prefix`: the path prefix the request
        /// matched, `nil` for a helper without `paths`.
        case helper(Int, prefix: String?)
        /// None lists the host for the tool, or none with a prefix the path is under and none
        /// without `paths`.
        case none
        /// Only helpers with `paths` list the host for the tool, and the request has no path:
        /// git sends it only with `credential.useHttpPath` set for the host.
        case pathNeeded
    }

    /// The rule by which a request for `host` (and `path`, when git sends one) from `tool`
    /// (`git`, `docker`) finds its provider, among the `credential_helper`s of the providers the
    /// caller may use. Of those that list the host for the tool, one with `paths` matches only a
    /// path under one of its prefixes, segment by segment (`org-a/` matches `org-a/repo.git` and
    /// `/org-a/repo.git`, not `org-ab/x`), and the longest prefix wins; one without `paths`
    /// matches any path (or none) and loses to any prefix that matches. A path with a `.` or
    /// `..` segment (or otherwise not a path) is under no prefix.
    public static func select(host: String, path: String?, tool: String, among helpers: [ProviderConfiguration.CredentialHelper]) -> Selection {
        var requested: String?
        if let path {
            var trimmed = Substring(path)
            while trimmed.hasPrefix("/") { trimmed = trimmed.dropFirst() }
            let segments = trimmed.hasSuffix("/") ? trimmed.dropLast() : trimmed
            requested = !segments.isEmpty && isPath(segments) ? segments + "/" : ""
        }
        var everyPath: Int?
        var best: (index: Int, prefix: String)?
        var scoped = false
        for (index, helper) in helpers.enumerated() where helper.tools.contains(tool) && helper.hosts.contains(where: { sameHost($0, host) }) {
            guard !helper.paths.isEmpty else {
                everyPath = everyPath ?? index
                continue
            }
            scoped = true
            for prefix in helper.paths where requested?.hasPrefix(prefix) == true && prefix.utf8.count > (best?.prefix.utf8.count ?? 0) {
                best = (index, prefix)
            }
        }
        if let best { return .helper(best.index, prefix: best.prefix) }
        if let everyPath { return .helper(everyPath, prefix: nil) }
        return scoped && requested == nil ? .pathNeeded : .none
    }

    /// The host of a docker server URL (`https://registry.example.com:5000/v2/`, or just the
    /// host, which docker means as HTTPS); `nil` for any other scheme (`http://`): the helpers
    /// hand tokens to HTTPS only.
    public static func fromServerURL(_ url: String) -> String? {
        var text = Substring(url.trimmingWhitespace())
        if let scheme = text.firstRange(of: "://") {
            guard text[..<scheme.lowerBound].lowercased() == "https" else { return nil }
            text = text[scheme.upperBound...]
        }
        if let slash = text.firstIndex(of: "/") { text = text[..<slash] }
        return normalize(String(text))
    }
}

private extension String {
    func trimmingWhitespace() -> Substring {
        let scalars = unicodeScalars
        let start = scalars.firstIndex { !$0.properties.isWhitespace } ?? scalars.endIndex
        let end = scalars.lastIndex { !$0.properties.isWhitespace }.map { scalars.index(after: $0) } ?? start
        return Substring(scalars[start..<max(start, end)])
    }
}
