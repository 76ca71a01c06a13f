import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("docker's configuration: the credHelpers entry")
struct DockerConfigurationTests {
    private func document(_ path: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    }

    @Test("configure adds the entry and keeps the rest of the file and its mode; again changes nothing; unconfigure removes only it")
    func configureAndUnconfigure() throws {
        let scratch = try ScratchDirectory()
        let file = scratch.path + "/config.json"
        try Data(#"{"auths": {"ghcr.io": {}}, "credHelpers": {"gcr.io": "gcloud"}, "psFormat": "table"}"#.utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o640)
        let added = try DockerConfiguration.apply(configure: true, registry: "Registry.Example.com:5000", file: file)
        #expect(added.contains("docker asks docker-credential-authgate for registry.example.com:5000"), "\(added)")
        var written = try document(file)
        #expect(written["credHelpers"] as? [String: String] == ["gcr.io": "gcloud", "registry.example.com:5000": "authgate"])
        #expect(written["psFormat"] as? String == "table" && written["auths"] != nil)
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o640)
        #expect(try DockerConfiguration.apply(configure: true, registry: "registry.example.com:5000", file: file).contains("already"))
        _ = try DockerConfiguration.apply(configure: false, registry: "registry.example.com:5000", file: file)
        written = try document(file)
        #expect(written["credHelpers"] as? [String: String] == ["gcr.io": "gcloud"])
        #expect(try DockerConfiguration.apply(configure: false, registry: "registry.example.com:5000", file: file).contains("nothing to remove"))
        #expect(scratch.entries == ["config.json"], "no temporary file left")
    }

    @Test("a file that is not docker's JSON object, or a registry that is not a host, is refused and nothing changes")
    func refusals() throws {
        let scratch = try ScratchDirectory()
        let file = scratch.path + "/config.json"
        try Data("not json".utf8).write(to: URL(fileURLWithPath: file))
        do {
            _ = try DockerConfiguration.apply(configure: true, registry: "registry.example.com", file: file)
            Issue.record("a broken file was overwritten")
        } catch let failure as ToolFailure {
            #expect(failure.status == ToolFailure.inputRefused && failure.description.contains("nothing was changed"))
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "not json")
        #expect(throws: ToolFailure.self) { try DockerConfiguration.apply(configure: true, registry: "https://registry.example.com/v2", file: file) }
        let fresh = scratch.path + "/new/config.json"
        _ = try DockerConfiguration.apply(configure: true, registry: "registry.example.com", file: fresh)
        #expect((try FileManager.default.attributesOfItem(atPath: fresh)[.posixPermissions] as? Int) == 0o600)
        #expect((try FileManager.default.attributesOfItem(atPath: scratch.path + "/new")[.posixPermissions] as? Int) == 0o700)
    }
}
