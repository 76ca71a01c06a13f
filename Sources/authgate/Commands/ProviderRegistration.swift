import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `provider add --register` and the delete of `provider remove` (``ClientRegistrar``): their
/// options, and what they print.
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
        let initialAccessToken: String?
        initialAccessToken = try ClientRegistrar.initialAccessToken(initialAccessTokenFile)
        let params = plan.request(draft, offer: offer, id: id, caFile: caFile, initialAccessToken: initialAccessToken)
        let summary = plan.summary(params)
        if dryRun {
            Terminal.writeError(
                "--dry-run registers nothing: it would register \(summary) at \(offer.registrationEndpoint.map(Terminal.safe) ?? "(no registration endpoint)"); the file's client_id is a placeholder.\n"
            )
            return print(draft.json(), terminator: "")
        }
        let registered: ClientRegistrar.Registered
        registered = try ClientRegistrar(daemon: global.daemon).register(
            draft,
            request: params,
            offer: offer,
            id: id,
            directory: directory,
            caFile: caFile,
            force: force,
            readableBy: daemonReader
        )
        if !global.json {
            let registration = registered.registration
            print("Registered the client \(Terminal.safe(registration.clientID)) at \(Terminal.safe(registration.registrationEndpoint)): \(summary).")
            if let granted = registration.grantTypes { print("The provider granted: \(granted.map(Terminal.safe).joined(separator: ", ")).") }
            if !registered.refused.isEmpty {
                print(
                    registered.refused.count < registered.asked.count
                        ? "Left out of the file, as the provider did not grant them: \(registered.refused.map(\.rawValue).joined(separator: ", "))."
                        : "The provider granted none of the grants asked for; the file keeps them, and sign-ins may be refused."
                )
            }
            if registration.registrationClientURI == nil {
                print("The provider gave no registration_client_uri (RFC 7592): provider remove cannot delete the client there.")
            }
            print("Wrote \(registered.path).")
        }
        if let earlier = registered.earlier {
            if let failure = earlier.failure {
                Terminal.writeError(
                    "authgate: \(failure.description)\nThe earlier client \(Terminal.safe(earlier.clientID)) stays registered at the provider.\n"
                )
            } else if !global.json {
                print("Deleted the earlier client \(Terminal.safe(earlier.clientID)) at the provider.")
            }
        }
        try ProviderFiles.reload(global, id: id, directory: directory, added: true)
    }

    /// The group the secret files are given to: the daemon's, when root writes them for a
    /// daemon that runs as another user (the system unit's `User=authgate`), so that it can read
    /// them (`root:authgate 0640`, as docs/CONFIGURATION.md asks of secret files); `nil` (0600,
    /// the writer's) otherwise.
    private func daemonReader() throws(ToolFailure) -> UInt32? {
        guard geteuid() == 0 else { return nil }
        let info = try global.daemon.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self)
        guard let uid = info.daemonUID, uid != 0, let gid = info.daemonGID else { return nil }
        return gid
    }
}

extension ProviderFiles.Remove {
    /// Deletes the registered client at the provider, if `ID.registration` says there is one;
    /// a refusal stops the removal unless `--force`.
    func deregister(id: ProviderID, directory: String) throws {
        do throws(ToolFailure) {
            guard let clientID = try ClientRegistrar(daemon: global.daemon).deregister(id: id, directory: directory) else { return }
            if !global.json { print("Deleted the client \(Terminal.safe(clientID)) at the provider.") }
        } catch {
            guard force else {
                throw ToolFailure(
                    "\(error.description)\nThe client was not deleted at the provider, and nothing was removed: pass --force to remove the files anyway.",
                    status: error.status
                )
            }
            Terminal.writeError("authgate: \(error.description)\nThe client stays registered at the provider; removing the files (--force).\n")
        }
    }
}
