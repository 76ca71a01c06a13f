import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The files of a client registered by provider add --register")
struct RegisteredClientFilesTests {
    private let id = ProviderID("corp")!

    /// Writes the files of client-1, registered with `secret`, into `directory`.
    private func write(secret: String, into directory: String, force: Bool = false) throws(ToolFailure) {
        var draft = ProviderFileDraft()
        draft.issuer = "https://idp.example.test"
        draft.clientID = "client-1"
        draft.grants = [.authorizationCode]
        let registration = ProviderRegistration(
            clientID: "client-1",
            clientSecret: secret,
            clientSecretExpiresAt: 0,
            registrationClientURI: "https://idp.example.test/register/client-1",
            registrationAccessToken: "registration-token-1",
            registrationEndpoint: "https://idp.example.test/register",
            grantTypes: ["authorization_code"],
            redirectURIs: ["http://127.0.0.1/callback"],
            tokenEndpointAuthMethod: "client_secret_basic",
            scope: nil
        )
        try RegisteredClientFiles.write(draft, registration: registration, id: id, directory: directory, caFile: nil, force: force, readableBy: nil)
    }

    private func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test(
        "the secret and the registration record (0600) and the provider file naming the secret; the record reads back; removeFiles leaves the provider file only"
    )
    func writes() throws {
        let scratch = try ScratchDirectory()
        try write(secret: "s3cret-1", into: scratch.path)
        let secretPath = ProviderFileStore.clientSecretPath(id: "corp", directory: scratch.path)
        let providerPath = ProviderFileStore.path(id: "corp", directory: scratch.path)
        let registrationPath = ProviderFileStore.registrationPath(id: "corp", directory: scratch.path)
        #expect(try String(contentsOfFile: secretPath, encoding: .utf8) == "s3cret-1")
        let provider = try String(contentsOfFile: providerPath, encoding: .utf8)
        #expect(provider.contains(#""client_secret_file" : "\#(secretPath)""#) || provider.contains(#""client_secret_file": "\#(secretPath)""#), "\(provider)")
        #expect(!provider.contains("s3cret-1") && !provider.contains("registration-token-1"))
        for path in [secretPath, registrationPath] { #expect(try mode(path) & 0o077 == 0, "\(path)") }
        #expect(try mode(providerPath) & 0o022 == 0)
        let record = try #require(RegisteredClientFiles.record(id: id, directory: scratch.path))
        #expect(record.clientID == "client-1" && record.registrationAccessToken == "registration-token-1")
        RegisteredClientFiles.removeFiles(id: id, directory: scratch.path)
        #expect(scratch.entries == [URL(fileURLWithPath: providerPath).lastPathComponent])
    }

    @Test(
        "a provider file already there: refused (provider_file.exists, status 5), and the secret and record this write made are gone again, the file untouched"
    )
    func rolledBack() throws {
        let scratch = try ScratchDirectory()
        let providerPath = ProviderFileStore.path(id: "corp", directory: scratch.path)
        try "{}\n".write(toFile: providerPath, atomically: false, encoding: .utf8)
        let refused = #expect(throws: ToolFailure.self) {
            try write(secret: "s3cret-1", into: scratch.path)
        }
        #expect(
            refused?.status == ToolFailure.inputRefused && refused?.description.hasSuffix("[provider_file.exists]") == true,
            "\(refused.map { "\($0)" } ?? "")"
        )
        #expect(scratch.entries == [URL(fileURLWithPath: providerPath).lastPathComponent])
        #expect(try String(contentsOfFile: providerPath, encoding: .utf8) == "{}\n")
    }

    @Test("--force replaces each file and keeps none of the copies it set aside")
    func forced() throws {
        let scratch = try ScratchDirectory()
        for secret in ["s3cret-1", "s3cret-2"] {
            try write(secret: secret, into: scratch.path, force: true)
        }
        let secretPath = ProviderFileStore.clientSecretPath(id: "corp", directory: scratch.path)
        #expect(try String(contentsOfFile: secretPath, encoding: .utf8) == "s3cret-2")
        #expect(scratch.entries.count == 3 && !scratch.entries.contains { $0.contains(".replaced-") }, "\(scratch.entries)")
    }
}
