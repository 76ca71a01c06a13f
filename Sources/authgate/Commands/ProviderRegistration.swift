import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `provider add --register` and the delete of `provider remove`: RFC 7591 dynamic client
/// registration and the RFC 7592 §2.3 delete, both run by the daemon (`provider.register`,
/// `provider.deregister`; the CLI has no HTTP client). What RFC 7592 needs to delete the client
/// later is kept in `ID.registration` (0600) beside the provider file, a client secret in
/// `ID.client-secret` (0600); neither is ever printed or put into the provider JSON.
enum ProviderRegistrationFiles {
    /// The initial access token of `--initial-access-token-file`, without surrounding whitespace.
    /// Read with `O_NOFOLLOW`, as a regular file of at most 64 KiB.
    static func initialAccessToken(_ path: String?) throws -> String? {
        guard let path else { return nil }
        guard case .success(let bytes) = FileTrust.readRegularFile(path, as: .secret, maximumSize: 64 << 10),
            case let token = String(decoding: bytes, as: UTF8.self).trimming(while: \.isWhitespace), !token.isEmpty
        else {
            throw CLIError(
                message:
                    "The initial access token file \(Terminal.safe(path)) cannot be read (it must be a regular file of at most 64 KiB, not a link) or is empty. [provider_file.unreadable]",
                exitCode: ExitStatus.inputRefused
            )
        }
        return token
    }

    /// Deletes the client of `ID.registration` at the provider, through the daemon; nothing to do
    /// without that file.
    /// - Returns: the client id deleted, `nil` without a registration file.
    static func deregister(_ global: GlobalOptions, id: ProviderID, directory: String) throws -> String? {
        let path = ProviderFileStore.registrationPath(id: id.rawValue, directory: directory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let record = RegisteredClientFiles.record(id: id, directory: directory) else {
            throw CLIError(
                message:
                    "\(path) is not a registration file authgate wrote; nothing was removed. Pass --force to remove the files without deleting the client at the provider. [provider_file.invalid]",
                exitCode: ExitStatus.inputRefused
            )
        }
        return try deregister(global, record)
    }

    /// Deletes the client of `record` at the provider, through the daemon.
    /// - Returns: the client id deleted.
    static func deregister(_ global: GlobalOptions, _ record: RegisteredClientFiles.Record) throws -> String {
        _ = try global.call(
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
}

extension ProviderFiles.Add {
    /// `--register`: the options that go with it.
    func checkRegistrationOptions() throws {
        guard register else {
            if initialAccessTokenFile != nil || privateKeyJWT {
                throw ValidationError("--initial-access-token-file and --private-key-jwt go with --register.")
            }
            return
        }
        guard issuer != nil else { throw ValidationError("--register needs --issuer: the registration endpoint is read from its discovery document.") }
        guard clientID == nil, clientSecretFile == nil else {
            throw ValidationError("--register obtains the client id (and secret) from the provider: leave out --client-id and --client-secret-file.")
        }
    }

    /// With `--register`, the draft as it will be once registered (``ClientRegistrationPlan``).
    func prepareRegistration(_ draft: inout ProviderFileDraft, directory: String) {
        guard register else { return }
        ClientRegistrationPlan(privateKeyJWT: privateKeyJWT)
            .prepare(&draft, id: ProviderID(name)?.rawValue ?? name, directory: RegisteredClientFiles.absolute(directory))
    }

    /// Registers a client for `draft` at the provider `offer` describes, then writes the
    /// provider file with its client id, the secret and registration files beside it, and
    /// reloads. With `--dry-run`, registers nothing and prints the file with a placeholder id.
    func registerAndWrite(_ draft: ProviderFileDraft, offer: ProviderOffer, id: ProviderID, directory: String) throws {
        var draft = draft
        let plan = ClientRegistrationPlan(privateKeyJWT: privateKeyJWT)
        if grants.isEmpty { draft.grants = ClientRegistrationPlan.defaultGrants(offer) }
        let params = plan.request(
            draft,
            offer: offer,
            id: id,
            caFile: caFile,
            initialAccessToken: try ProviderRegistrationFiles.initialAccessToken(initialAccessTokenFile)
        )
        let summary = plan.summary(params)
        if dryRun {
            Terminal.writeError(
                "--dry-run registers nothing: it would register \(summary) at \(offer.registrationEndpoint.map(Terminal.safe) ?? "(no registration endpoint)"); the file's client_id is a placeholder.\n"
            )
            return print(draft.json(), terminator: "")
        }
        guard offer.registrationEndpoint != nil else {
            throw CLIError(
                message:
                    "\(Terminal.safe(offer.issuer)) offers no dynamic client registration (its discovery document names no registration_endpoint): register a client by hand and pass --client-id. [unsupported_grant]",
                exitCode: ExitStatus.providerUnusable
            )
        }
        let target = ProviderFileStore.path(id: id.rawValue, directory: directory)
        if !force, FileManager.default.fileExists(atPath: target) {
            throw CLIError(message: "\(target) exists; pass --force to replace it. [provider_file.exists]", exitCode: ExitStatus.inputRefused)
        }
        // --force over a client `add --register` made: it is deleted at the provider once the
        // new one is written, so replacing the file leaves no client behind.
        let earlier = force ? RegisteredClientFiles.record(id: id, directory: directory) : nil
        let registration = try global.call(.providerRegister, params, as: ProviderRegistration.self, progress: "Registering a client…")
        draft.clientID = registration.clientID
        // The provider may register fewer grants than asked: the file lists only those.
        let (kept, refused) = ClientRegistrationPlan.granted(draft.grants, by: registration)
        draft.grants = kept
        do {
            try write(draft, registration: registration, id: id, directory: directory)
        } catch {
            // No file names the client: delete it at the provider again, where that is possible.
            if let uri = registration.registrationClientURI, let token = registration.registrationAccessToken {
                _ = try? global.call(
                    .providerDeregister,
                    ProviderDeregisterParams(registrationClientURI: uri, registrationAccessToken: token, caFile: caFile),
                    as: ProviderDeregistration.self
                )
            }
            throw error
        }
        if !global.json {
            print("Registered the client \(Terminal.safe(registration.clientID)) at \(Terminal.safe(registration.registrationEndpoint)): \(summary).")
            if let granted = registration.grantTypes { print("The provider granted: \(granted.map(Terminal.safe).joined(separator: ", ")).") }
            if !refused.isEmpty {
                print(
                    refused.count < params.grants.count
                        ? "Left out of the file, as the provider did not grant them: \(refused.map(\.rawValue).joined(separator: ", "))."
                        : "The provider granted none of the grants asked for; the file keeps them, and sign-ins may be refused."
                )
            }
            if registration.registrationClientURI == nil {
                print("The provider gave no registration_client_uri (RFC 7592): provider remove cannot delete the client there.")
            }
            print("Wrote \(target).")
        }
        // (A provider that answered with the same client id again keeps it.)
        if let earlier, earlier.clientID != registration.clientID {
            do {
                let deleted = try ProviderRegistrationFiles.deregister(global, earlier)
                if !global.json { print("Deleted the earlier client \(Terminal.safe(deleted)) at the provider.") }
            } catch let error as CLIError {
                Terminal.writeError("authgate: \(error.message)\nThe earlier client \(Terminal.safe(earlier.clientID)) stays registered at the provider.\n")
            }
        }
        try ProviderFiles.reload(global, id: id, directory: directory, added: true)
    }

    /// The registered client's files (``RegisteredClientFiles/write(_:registration:id:directory:caFile:force:readableBy:)``).
    private func write(_ draft: ProviderFileDraft, registration: ProviderRegistration, id: ProviderID, directory: String) throws {
        do {
            try RegisteredClientFiles.write(
                draft,
                registration: registration,
                id: id,
                directory: directory,
                caFile: caFile,
                force: force,
                readableBy: try daemonReader()
            )
        } catch let failure as ToolFailure {
            throw CLIError(failure)
        }
    }

    /// The group the secret files are given to: the daemon's, when root writes them for a
    /// daemon that runs as another user (the system unit's `User=authgate`), so that it can read
    /// them (`root:authgate 0640`, as docs/CONFIGURATION.md asks of secret files); `nil` (0600,
    /// the writer's) otherwise.
    private func daemonReader() throws -> UInt32? {
        guard geteuid() == 0 else { return nil }
        let info = try global.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self)
        guard let uid = info.daemonUID, uid != 0, let gid = info.daemonGID else { return nil }
        return gid
    }
}

extension ProviderFiles.Remove {
    /// Deletes the registered client at the provider, if `ID.registration` says there is one;
    /// a refusal stops the removal unless `--force`.
    func deregister(id: ProviderID, directory: String) throws {
        do {
            guard let clientID = try ProviderRegistrationFiles.deregister(global, id: id, directory: directory) else { return }
            if !global.json { print("Deleted the client \(Terminal.safe(clientID)) at the provider.") }
        } catch let error as CLIError {
            guard force else {
                throw CLIError(
                    message: "\(error.message)\nThe client was not deleted at the provider, and nothing was removed: pass --force to remove the files anyway.",
                    exitCode: error.exitCode
                )
            }
            Terminal.writeError("authgate: \(error.message)\nThe client stays registered at the provider; removing the files (--force).\n")
        }
    }
}
