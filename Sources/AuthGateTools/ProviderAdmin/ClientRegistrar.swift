package import AuthGateCore
package import AuthGateRPC
import FoundationEssentials

/// `provider add --register` and the delete of `provider remove`, through the daemon (the CLI has
/// no HTTP client): RFC 7591 registration (`provider.register`), the client's files written
/// (``RegisteredClientFiles``), and RFC 7592 §2.3 deletes (`provider.deregister`) — of a client
/// no file could be written for, of the earlier client `--force` replaced, and of the client
/// `ID.registration` names when its provider is removed. What the provider issued is never
/// returned in a sentence: the secrets go to their files only.
package struct ClientRegistrar {
    package let daemon: DaemonConnection

    package init(daemon: DaemonConnection) {
        self.daemon = daemon
    }

    /// A client registered and its files written.
    package struct Registered {
        package var registration: ProviderRegistration
        /// The grants asked for, and those the provider did not grant (left out of the file
        /// unless it granted none of them).
        package var asked: [Grant]
        package var refused: [Grant]
        /// The provider file written.
        package var path: String
        /// The earlier client `--force` replaced at the provider (its id), and why it stays
        /// registered there when its delete failed; `nil` when there was none to delete.
        package var earlier: (clientID: String, failure: ToolFailure?)?
    }

    /// Registers the client `request` describes at the provider `offer` describes, then writes
    /// `draft` with its client id, the secret or key and the registration record beside it.
    /// Nothing is registered when the provider has no registration endpoint or the file exists
    /// without `force`; a client no file could be written for is deleted at the provider again
    /// (where it said how), so a failure leaves no client behind.
    /// - Parameter reader: The group the secret files are given to (the daemon's, when root
    ///   writes them for a daemon running as another user), asked only once they are written.
    package func register(
        _ draft: ProviderFileDraft,
        request: ProviderRegisterParams,
        offer: ProviderOffer,
        id: ProviderID,
        directory: String,
        caFile: String?,
        force: Bool,
        readableBy reader: () throws(ToolFailure) -> UInt32?
    ) throws(ToolFailure) -> Registered {
        guard offer.registrationEndpoint != nil else {
            throw ToolFailure(
                "\(Terminal.safe(offer.issuer)) offers no dynamic client registration (its discovery document names no registration_endpoint): register a client by hand and pass --client-id. [unsupported_grant]",
                status: ToolFailure.providerUnusable
            )
        }
        let path = ProviderFileStore.path(id: id.rawValue, directory: directory)
        if !force, FileManager.default.fileExists(atPath: path) {
            throw ToolFailure("\(path) exists; pass --force to replace it. [provider_file.exists]", status: ToolFailure.inputRefused)
        }
        // --force over a client `add --register` made: it is deleted at the provider once the
        // new one is written, so replacing the file leaves no client behind.
        let earlier = force ? RegisteredClientFiles.record(id: id, directory: directory) : nil
        let registration = try daemon.call(.providerRegister, request, as: ProviderRegistration.self, progress: "Registering a client…")
        var draft = draft
        draft.clientID = registration.clientID
        // The provider may register fewer grants than asked: the file lists only those.
        let (kept, refused) = ClientRegistrationPlan.granted(draft.grants, by: registration)
        draft.grants = kept
        do throws(ToolFailure) {
            try RegisteredClientFiles.write(
                draft,
                registration: registration,
                id: id,
                directory: directory,
                caFile: caFile,
                force: force,
                readableBy: try reader()
            )
        } catch {
            // No file names the client: delete it at the provider again, where that is possible.
            if let uri = registration.registrationClientURI, let token = registration.registrationAccessToken {
                _ = try? daemon.call(
                    .providerDeregister,
                    ProviderDeregisterParams(registrationClientURI: uri, registrationAccessToken: token, caFile: caFile),
                    as: ProviderDeregistration.self
                )
            }
            throw error
        }
        var registered = Registered(registration: registration, asked: request.grants, refused: refused, path: path)
        // (A provider that answered with the same client id again keeps it.)
        if let earlier, earlier.clientID != registration.clientID {
            do throws(ToolFailure) {
                registered.earlier = (try deregister(earlier), nil)
            } catch {
                registered.earlier = (earlier.clientID, error)
            }
        }
        return registered
    }

    /// Deletes the client `ID.registration` names at the provider; nothing to do without that file.
    /// - Returns: the client id deleted, `nil` without a registration file.
    package func deregister(id: ProviderID, directory: String) throws(ToolFailure) -> String? {
        let path = ProviderFileStore.registrationPath(id: id.rawValue, directory: directory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let record = RegisteredClientFiles.record(id: id, directory: directory) else {
            throw ToolFailure(
                "\(path) is not a registration file authgate wrote; nothing was removed. Pass --force to remove the files without deleting the client at the provider. [provider_file.invalid]",
                status: ToolFailure.inputRefused
            )
        }
        return try deregister(record)
    }

    /// Deletes the client of `record` at the provider.
    /// - Returns: the client id deleted.
    package func deregister(_ record: RegisteredClientFiles.Record) throws(ToolFailure) -> String {
        _ = try daemon.call(
            .providerDeregister,
            ProviderDeregisterParams(
                registrationClientURI: record.registrationClientURI,
                registrationAccessToken: record.registrationAccessToken,
                caFile: record.caFile
            ),
            as: ProviderDeregistration.self,
            progress: "Deleting the client at the provider…"
        )
        return record.clientID
    }

    /// The initial access token of `--initial-access-token-file`, without surrounding whitespace:
    /// a regular file of at most 64 KiB, read with `O_NOFOLLOW`.
    package static func initialAccessToken(_ path: String?) throws(ToolFailure) -> String? {
        guard let path else { return nil }
        guard case .success(let bytes) = FileTrust.readRegularFile(path, as: .secret, maximumSize: 64 << 10),
            case let token = String(decoding: bytes, as: UTF8.self).trimming(while: \.isWhitespace), !token.isEmpty
        else {
            throw ToolFailure(
                "The initial access token file \(Terminal.safe(path)) cannot be read (it must be a regular file of at most 64 KiB, not a link) or is empty. [provider_file.unreadable]",
                status: ToolFailure.inputRefused
            )
        }
        return token
    }
}
