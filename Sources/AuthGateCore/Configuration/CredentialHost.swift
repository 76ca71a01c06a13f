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
    /// skipped, and a key given twice keeps its last value.
    public static func gitAttributes(_ lines: some Sequence<String>) -> [String: String] {
        var attributes: [String: String] = [:]
        for line in lines {
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: "=") else { continue }
            attributes[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return attributes
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
