import Foundation
import Testing

@testable import AuthGateCore

#if canImport(Glibc)
import Glibc
#endif

/// The trusted-file rule (``FileTrust/read(_:as:maximumSize:owners:)``) against links another
/// user planted: with files owned by `nobody` (uid 65534), made by this root test process.
@Suite("Trusted files and planted links")
struct FileTrustTests {
    private static let nobody: UInt32 = 65534

    /// A root-owned directory (0755) in a fresh temporary one, with a root-only 0600 secret.
    private func layout() throws -> (root: String, secret: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("filetrust-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/etc", withIntermediateDirectories: true)
        chmod(root, 0o755)
        chmod(root + "/etc", 0o755)
        let secret = root + "/etc/other-service.jwt"
        try Data("eyJhbGciOiJub25lIn0.eyJzdWIiOiJvdGhlciJ9.".utf8).write(to: URL(fileURLWithPath: secret))
        chmod(secret, 0o600)
        return (root, secret)
    }

    @Test(
        "a link another user planted is refused before its target is looked at, whichever target it names; root's own links are followed",
        .enabled(if: getuid() == 0, "needs root to give files to another uid")
    )
    func plantedLinks() throws {
        let (root, secret) = try layout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A directory nobody owns, named by a root-written provider file: a link there to the
        // root-only secret must not be read (the old rule resolved the link first, then
        // checked only the target's directories).
        try FileManager.default.createDirectory(atPath: root + "/nobodys", withIntermediateDirectories: false)
        chown(root + "/nobodys", Self.nobody, Self.nobody)
        try FileManager.default.createSymbolicLink(atPath: root + "/nobodys/planted-a", withDestinationPath: secret)
        lchown(root + "/nobodys/planted-a", Self.nobody, Self.nobody)
        try FileManager.default.createSymbolicLink(atPath: root + "/nobodys/planted-b", withDestinationPath: root + "/etc/no-such-file")
        lchown(root + "/nobodys/planted-b", Self.nobody, Self.nobody)

        var sentences: [String] = []
        for name in ["planted-a", "planted-b"] {
            guard case .failure(let problem) = FileTrust.read(root + "/nobodys/\(name)", as: .workloadToken, maximumSize: 4096) else {
                Issue.record("nobody's link \(name) was followed")
                continue
            }
            #expect(problem.refused, "\(problem)")
            #expect(!problem.description.contains("other-service") && !problem.description.contains("no-such-file"), "\(problem)")
            sentences.append(problem.description.replacingOccurrences(of: name, with: "NAME"))
        }
        #expect(sentences.count == 2 && sentences[0] == sentences[1], "the answer depends on the link's target: \(sentences)")

        // nobody's link in a root-owned directory (as a sticky directory lets anyone plant one).
        try FileManager.default.createSymbolicLink(atPath: root + "/etc/planted", withDestinationPath: secret)
        lchown(root + "/etc/planted", Self.nobody, Self.nobody)
        guard case .failure(let planted) = FileTrust.read(root + "/etc/planted", as: .secret, maximumSize: 4096) else {
            Issue.record("nobody's link in root's directory was followed")
            return
        }
        #expect(planted.refused && planted.description.contains("owned by uid 65534"), "\(planted)")

        // Root's own link (a Kubernetes projected token is a link to ..data/token) is followed.
        try FileManager.default.createSymbolicLink(atPath: root + "/etc/current", withDestinationPath: "other-service.jwt")
        guard case .success(let bytes) = FileTrust.read(root + "/etc/current", as: .secret, maximumSize: 4096) else {
            Issue.record("root's own link was refused")
            return
        }
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("eyJ"))
    }

    @Test(
        "a directory on the way that another user owns is refused even when a link of root's leads through it",
        .enabled(if: getuid() == 0, "needs root to give files to another uid")
    )
    func linkThroughForeignDirectory() throws {
        let (root, _) = try layout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/nobodys", withIntermediateDirectories: false)
        try Data("secret".utf8).write(to: URL(fileURLWithPath: root + "/nobodys/client.secret"))
        chmod(root + "/nobodys/client.secret", 0o600)
        chown(root + "/nobodys", Self.nobody, Self.nobody)
        try FileManager.default.createSymbolicLink(atPath: root + "/etc/client.secret", withDestinationPath: root + "/nobodys/client.secret")
        guard case .failure(let problem) = FileTrust.read(root + "/etc/client.secret", as: .secret, maximumSize: 4096) else {
            Issue.record("a file in nobody's directory was read through root's link")
            return
        }
        #expect(problem.refused && problem.description.contains("is owned by uid 65534"), "\(problem)")
    }

    @Test(
        "in a sticky directory any user may add to, a file with a second name (a hard link another user may have made to a root-only file) is refused; a file with one name is read",
        .enabled(if: getuid() == 0, "a sticky directory of root's, as /tmp is")
    )
    func hardLinksInStickyDirectories() throws {
        let (root, secret) = try layout()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sticky = root + "/shared"
        try FileManager.default.createDirectory(atPath: sticky, withIntermediateDirectories: false)
        #expect(chmod(sticky, 0o1777) == 0)
        #expect(link(secret, sticky + "/token") == 0)
        guard case .failure(let problem) = FileTrust.read(sticky + "/token", as: .workloadToken, maximumSize: 4096) else {
            Issue.record("a hard link in a sticky directory was read")
            return
        }
        #expect(problem.refused && problem.description.contains("2 names (hard links)"), "\(problem)")
        try Data("eyJ.eyJ.".utf8).write(to: URL(fileURLWithPath: sticky + "/own"))
        chmod(sticky + "/own", 0o600)
        guard case .success = FileTrust.read(sticky + "/own", as: .workloadToken, maximumSize: 4096) else {
            Issue.record("a file with one name in a sticky directory was refused")
            return
        }
    }
}
