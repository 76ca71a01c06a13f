import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The helpers' host, path and attribute rules, in process (the helpers themselves run as
/// processes in CredentialHelperTests).
@Suite("Credential hosts: server URLs, ports, paths, provider selection, attributes")
struct CredentialHostTests {
    @Test(
        "CredentialHost.fromServerURL takes a bare host or https:// only",
        arguments: [
            ("registry.example.com", "registry.example.com"), ("https://Registry.example.com:5000/v2/", "registry.example.com:5000"),
            ("http://registry.example.com", nil), ("ftp://registry.example.com", nil), ("://registry.example.com", nil),
            ("httpsx://registry.example.com", nil),
        ] as [(String, String?)]
    )
    func serverURLSchemes(url: String, host: String?) {
        #expect(CredentialHost.fromServerURL(url) == host)
    }

    @Test(
        "credential.get's params written by Core's plain writer are what the encoder writes",
        arguments: [
            CredentialParams(host: "git.example.com", tool: "git", minValidSeconds: 60), CredentialParams(host: "[::1]:8443", tool: "docker"),
            CredentialParams(host: #"a"b\c\#u{01}"#, tool: "git", minValidSeconds: 0),
            CredentialParams(host: "git.example.com", tool: "git", minValidSeconds: 60, path: "org-a/repo.git", username: "alice"),
            CredentialParams(host: "git.example.com", tool: "git", path: #"p"\"#), CredentialParams(host: "git.example.com", tool: "git", username: "bob"),
        ]
    )
    func plainCredentialParams(params: CredentialParams) throws {
        let encoded = try RPCCoding.makeEncoder().encode(params)
        #expect(String(decoding: JSONValue.object(params.plainParams).jsonBytes, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
    }

    @Test(
        "the scheme's default port names the same host",
        arguments: [
            ("example.com:443", "example.com", true), ("example.com", "example.com:443", true),
            ("example.com:8443", "example.com", false), ("a.example.com", "example.com", false),
        ]
    )
    func defaultPort(one: String, other: String, same: Bool) {
        #expect(CredentialHost.sameHost(one, other) == same)
    }

    /// Four providers on one forge: two organisations with their prefixes, one without paths,
    /// and one for docker only.
    private static let forge: [ProviderConfiguration.CredentialHelper] = [
        .init(hosts: ["forge.example.com"], tools: ["git"], paths: ["org-a/"]),
        .init(hosts: ["forge.example.com"], paths: ["org-b/", "org-a/team/"]),
        .init(hosts: ["other.example.com", "forge.example.com"]),
        .init(hosts: ["forge.example.com"], tools: ["docker"]),
    ]

    @Test(
        "CredentialHost.select: a prefix matches whole segments, the longest wins, a provider without paths takes the rest",
        arguments: [
            ("org-a/repo.git", .helper(0, prefix: "org-a/")), ("/org-a/repo.git", .helper(0, prefix: "org-a/")), ("org-a", .helper(0, prefix: "org-a/")),
            ("org-a/team/repo.git", .helper(1, prefix: "org-a/team/")), ("org-a/teams/repo.git", .helper(0, prefix: "org-a/")),
            ("org-b/x.git", .helper(1, prefix: "org-b/")), ("org-ab/x.git", .helper(2, prefix: nil)), ("Org-A/x.git", .helper(2, prefix: nil)),
            ("org-a/../org-b/x.git", .helper(2, prefix: nil)), ("", .helper(2, prefix: nil)), (nil, .helper(2, prefix: nil)),
        ] as [(String?, CredentialHost.Selection)]
    )
    func selectByPath(path: String?, expected: CredentialHost.Selection) {
        #expect(CredentialHost.select(host: "forge.example.com", path: path, tool: "git", among: Self.forge) == expected)
        #expect(CredentialHost.select(host: "forge.example.com:443", path: path, tool: "git", among: Self.forge) == expected)
    }

    @Test("CredentialHost.select: only path-scoped providers and no path asks for useHttpPath; the tool and the host must match")
    func selectWithoutFallback() {
        let scoped = Array(Self.forge.prefix(2))
        #expect(CredentialHost.select(host: "forge.example.com", path: nil, tool: "git", among: scoped) == .pathNeeded)
        #expect(CredentialHost.select(host: "forge.example.com", path: "org-c/x.git", tool: "git", among: scoped) == .none)
        #expect(CredentialHost.select(host: "forge.example.com", path: "org-a/x.git", tool: "docker", among: scoped) == .none)
        #expect(CredentialHost.select(host: "forge.example.com", path: nil, tool: "docker", among: Self.forge) == .helper(2, prefix: nil))
        #expect(CredentialHost.select(host: "other.example.com", path: "org-a/x.git", tool: "git", among: Self.forge) == .helper(2, prefix: nil))
        #expect(CredentialHost.select(host: "forge.example.com:8443", path: "org-a/x.git", tool: "git", among: Self.forge) == .none)
        #expect(CredentialHost.select(host: "forge.example.com", path: "org-b/x", tool: "git", among: []) == .none)
    }

    @Test(
        "CredentialHost.pathPrefix normalises a leading and trailing slash, and refuses what is not a path",
        arguments: [
            ("org-a", "org-a/"), ("/org-a/", "org-a/"), ("org-a/team", "org-a/team/"), ("", nil), ("/", nil), ("a//b", nil), ("../x", nil), ("a/./b", nil),
            ("a b", nil), ("a?b", nil), ("a#b", nil), ("a\u{7F}", nil),
        ] as [(String, String?)]
    )
    func pathPrefixes(text: String, prefix: String?) {
        #expect(CredentialHost.pathPrefix(text) == prefix)
    }

    @Test("git's capability[] (and every key ending in []) keeps each value; any other key its last")
    func multiValuedAttributes() {
        let attributes = CredentialHost.gitAttributes(["capability[]=authtype", "host=a", "capability[]=state", "host=b", "", "host=c"])
        #expect(attributes == ["capability[]": "authtype\nstate", "host": "b"])
    }
}
