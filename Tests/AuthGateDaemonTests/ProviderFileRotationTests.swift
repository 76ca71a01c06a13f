import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Crypto
import Foundation
import Logging
import Testing

@testable import AuthGateDaemon
@testable import AuthGateOAuth

#if canImport(Glibc)
import Glibc
#endif

/// A provider's trusted files (client key, certificate, its key, CA file) replaced in place
/// make a reload count the provider as changed.
@Suite("Providers: trusted files replaced in place", .serialized)
struct ProviderFileRotationTests {
    private static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    // MARK: Files rotated in place

    @Test("a client key, client certificate, its key or CA file replaced in place makes the provider changed on reload")
    func rotatedFilesChangeTheProvider() async throws {
        let scratch = try ScratchDirectory()
        let files = ["key.pem", "ca.pem", "cert.pem", "tls-key.pem"]
        func write(_ name: String, _ text: String) throws {
            try scratch.write(name, text)
            chmod(scratch.path + "/" + name, 0o600)
        }
        try write("key.pem", P256.Signing.PrivateKey().pemRepresentation)
        try write("ca.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        try write("cert.pem", "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n")
        try write("tls-key.pem", P256.Signing.PrivateKey().pemRepresentation)
        let json = #"""
            {"type": "oauth2", "endpoints": {"token": "https://127.0.0.1:9/token"}, "client_id": "c", "grants": ["client_credentials"],
             "client_auth": "private_key_jwt", "client_key_file": "\#(scratch.path)/key.pem",
             "tls": {"ca_file": "\#(scratch.path)/ca.pem", "client_cert_file": "\#(scratch.path)/cert.pem", "client_key_file": "\#(scratch.path)/tls-key.pem"}}
            """#
        func load() -> RegisteredProvider {
            RegisteredProvider.make(ProviderConfigurationLoader.parse(Data(json.utf8), id: "svc", file: "svc.json"), logger: Self.quiet)
        }
        let registry = ProviderRegistry([load()])
        #expect(load().remote != nil, "\(load().statusReason ?? "")")
        #expect(load().hasSameDefinition(as: load()), "the same files are the same provider")
        for file in files {
            let replacement =
                file.hasSuffix("key.pem")
                ? P256.Signing.PrivateKey().pemRepresentation
                : "-----BEGIN CERTIFICATE-----\n\(UUID().uuidString)\n-----END CERTIFICATE-----\n"
            let before = load()
            try write(file, replacement)
            #expect(!before.hasSameDefinition(as: load()), "\(file) rotated")
            let changes = await registry.replace(with: [load()])
            #expect(changes.map(\.kind) == [.changed], "\(file): \(changes.map(\.kind))")
        }
    }
}
