import Foundation
import Synchronization
import Testing

@testable import AuthGateCore

/// How `authgate provider add/remove` write the providers directory, in process.
@Suite("The providers directory on disk")
struct ProviderFileStoreTests {
    private func scratch() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("agfs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    @Test("of 16 concurrent writes of one new provider file without --force exactly one lands, the others are told it exists; no temporary file is left")
    func concurrentAddsWithoutForce() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let id = try #require(ProviderID("corp"))
        let outcomes = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            let outcome: String
            do throws(ProviderFileError) {
                try ProviderFileStore.write("{\"writer\": \(index)}\n", id: id, directory: directory, force: false)
                outcome = "written"
            } catch {
                outcome = error.code
            }
            outcomes.withLock { $0.append(outcome) }
        }
        let all = outcomes.withLock { $0 }
        #expect(all.count { $0 == "written" } == 1, "\(all)")
        #expect(all.allSatisfy { $0 == "written" || $0 == "provider_file.exists" }, "\(all)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["corp.json"])
        // With force, a file is replaced.
        try ProviderFileStore.write("{\"writer\": \"forced\"}\n", id: id, directory: directory, force: true)
        #expect(try String(contentsOfFile: directory + "/corp.json", encoding: .utf8).contains("forced"))
    }

    @Test("a secret file is 0600, or 0640 with the daemon's group; not replaced unless asked")
    func privateFiles() throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/corp.client-secret"
        try ProviderFileStore.writePrivate("s1\n", to: path, directory: directory, replacing: false)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        #expect(throws: ProviderFileError.self) { try ProviderFileStore.writePrivate("s2\n", to: path, directory: directory, replacing: false) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "s1\n")
        let group = UInt32(getegid())
        try ProviderFileStore.writePrivate("s3\n", to: path, directory: directory, replacing: true, readableBy: group)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.posixPermissions] as? Int == 0o640 && (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value == group)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "s3\n")
    }
}
