package import AuthGateCore
package import AuthGateRPC
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The files `authgate provider add --register` leaves for a client it registered: the client
/// secret or key the daemon reads, `ID.registration` (what deletes the client at the provider
/// again, the CLI's alone) and the provider file naming them; written so that a failure leaves
/// the directory as it was.
package enum RegisteredClientFiles {
    /// `ID.registration`: JSON, 0600.
    package struct Record: Codable {
        package var clientID: String
        package var registrationClientURI: String
        package var registrationAccessToken: String
        package var registrationEndpoint: String
        package var caFile: String?

        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case registrationClientURI = "registration_client_uri"
            case registrationAccessToken = "registration_access_token"
            case registrationEndpoint = "registration_endpoint"
            case caFile = "ca_file"
        }
    }

    /// An absolute form of the providers directory, for the `client_secret_file` the provider
    /// file names.
    package static func absolute(_ directory: String) -> String {
        directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
    }

    /// What `ID.registration` holds; `nil` when there is no such file or it is not one authgate wrote.
    package static func record(id: ProviderID, directory: String) -> Record? {
        FileManager.default.contents(atPath: ProviderFileStore.registrationPath(id: id.rawValue, directory: directory))
            .flatMap { try? JSONDecoder().decode(Record.self, from: $0) }
    }

    /// Removes `ID.registration`, `ID.client-secret` and `ID.key` where they exist.
    package static func removeFiles(id: ProviderID, directory: String) {
        for path in [
            ProviderFileStore.registrationPath(id: id.rawValue, directory: directory),
            ProviderFileStore.clientSecretPath(id: id.rawValue, directory: directory),
            ProviderFileStore.clientKeyPath(id: id.rawValue, directory: directory),
        ] {
            unlink(path)
        }
    }

    /// Writes the secret file, the registration file, then the provider file. Without `--force` none
    /// replaces a file (two concurrent adds: one wins, the other is refused and deletes its
    /// client); with it, each file replaced is kept aside until the provider file is written.
    /// When a later file cannot be written, the files this command wrote go and the ones it
    /// replaced come back, so the earlier provider file still finds its own.
    package static func write(
        _ draft: ProviderFileDraft,
        registration: ProviderRegistration,
        id: ProviderID,
        directory: String,
        caFile: String?,
        force: Bool,
        readableBy reader: UInt32?
    ) throws(ToolFailure) {
        var draft = draft
        // The placeholders of prepareRegistration: what the provider issued takes their place.
        (draft.clientSecretFile, draft.clientAuth, draft.clientKeyFile, draft.clientKeyID) = (nil, nil, nil, nil)
        var written: [String] = []
        var replaced: [(target: String, kept: String)] = []
        // The daemon reads the secret and the key; the registration file is the CLI's alone.
        func put(_ text: String, at path: String, forDaemon: Bool = true) throws(ProviderFileError) {
            let kept = path + ".replaced-\(getpid())"
            if force, link(path, kept) == 0 { replaced.append((path, kept)) }
            try ProviderFileStore.writePrivate(text, to: path, directory: directory, replacing: force, readableBy: forDaemon ? reader : nil)
            written.append(path)
        }
        do throws(ProviderFileError) {
            if let secret = registration.clientSecret {
                let path = ProviderFileStore.clientSecretPath(id: id.rawValue, directory: absolute(directory))
                try put(secret, at: path)
                draft.clientSecretFile = path
            }
            if let pem = registration.clientKeyPEM, let keyID = registration.clientKeyID {
                let path = ProviderFileStore.clientKeyPath(id: id.rawValue, directory: absolute(directory))
                try put(pem, at: path)
                (draft.clientAuth, draft.clientKeyFile, draft.clientKeyID) = ("private_key_jwt", path, keyID)
            }
            if let uri = registration.registrationClientURI, let token = registration.registrationAccessToken {
                let record = Record(
                    clientID: registration.clientID,
                    registrationClientURI: uri,
                    registrationAccessToken: token,
                    registrationEndpoint: registration.registrationEndpoint,
                    caFile: caFile
                )
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                let text = String(decoding: (try? encoder.encode(record)) ?? Data(), as: UTF8.self) + "\n"
                try put(text, at: ProviderFileStore.registrationPath(id: id.rawValue, directory: directory), forDaemon: false)
            }
            // Checked again as registered: a provider that issued no secret for a client
            // credentials client leaves a file the daemon would refuse.
            let report = draft.check(id: id.rawValue, directory: directory)
            guard report.configuration != nil else {
                throw ProviderFileError(
                    "provider_file.invalid",
                    "The registered client cannot be used as asked, so no file was written: "
                        + report.problems.map { Terminal.safe($0.description) }.joined(separator: "; ")
                )
            }
            try ProviderFileStore.write(draft.json(), id: id, directory: directory, force: force)
        } catch {
            for path in written { unlink(path) }
            for file in replaced { rename(file.kept, file.target) }
            throw ToolFailure(
                "\(error.message) [\(error.code)]",
                status: error.code == "provider_file.exists" ? ToolFailure.inputRefused : ToolFailure.internalError
            )
        }
        for file in replaced { unlink(file.kept) }
    }
}
