package import AuthGateCore
import AuthGateRPC
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `authgate provider add` and `remove` once their answers are in: the file checked by the
/// daemon's own rules, what the issuer offers, the client registered (RFC 7591) or deleted
/// (RFC 7592) at the provider, the files written or removed, and the daemon's reload, which
/// must show the change (``ProviderDirectory/reloaded(_:id:added:directory:daemonReads:)``).
/// What each step did is printed as it happens (nothing but the file or JSON under `--dry-run`
/// or `--json`).
package struct ProviderFileChange {
    package var id: ProviderID
    /// The providers directory (``daemonDirectory(_:)`` unless given).
    package var directory: String
    /// `--force`: replace an existing file (`add`), remove the files though the provider
    /// refused to delete the client (`remove`).
    package var force: Bool
    package var daemon: DaemonConnection

    package init(id: ProviderID, directory: String, force: Bool, daemon: DaemonConnection) {
        self.id = id
        self.directory = directory
        self.force = force
        self.daemon = daemon
    }

    /// `add --register` and its options.
    package struct Registration {
        package var privateKeyJWT: Bool
        package var initialAccessTokenFile: String?

        package init(privateKeyJWT: Bool, initialAccessTokenFile: String?) {
            self.privateKeyJWT = privateKeyJWT
            self.initialAccessTokenFile = initialAccessTokenFile
        }
    }

    /// `name` as a provider id, else the sentence that says what one is.
    package static func id(_ name: String) throws(ToolFailure) -> ProviderID {
        guard let id = ProviderID(name) else {
            throw ToolFailure(
                "\"\(Terminal.safe(name))\" is not a provider id: [a-z0-9][a-z0-9_-]*, at most 64 characters. [provider_file.invalid]",
                status: ToolFailure.inputRefused
            )
        }
        return id
    }

    /// The directory the daemon says it reads (`daemon.info`): a guess could be another
    /// directory than the daemon's (a daemon started in a checkout reads ./providers.d), and a
    /// file written there would never be loaded.
    package static func daemonDirectory(_ daemon: DaemonConnection) throws(ToolFailure) -> String {
        do throws(ToolFailure) {
            return try daemon.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self).configDir
        } catch {
            throw ToolFailure(
                "\(error.description)\nWithout the daemon, authgate cannot tell which providers directory it reads: start it, or pass --providers-dir DIR.",
                status: error.status
            )
        }
    }

    /// `provider add`: checks `draft`, reads its issuer's offer, registers a client when
    /// `registration` is given, writes the file (or prints it: `dryRun`) and reloads.
    package func add(_ draft: ProviderFileDraft, registration: Registration?, dryRun: Bool) throws {
        var draft = draft
        if let registration {
            ClientRegistrationPlan(privateKeyJWT: registration.privateKeyJWT)
                .prepare(&draft, id: id.rawValue, directory: RegisteredClientFiles.absolute(directory))
        }
        let report = draft.check(id: id.rawValue, directory: directory)
        guard report.configuration != nil else {
            let problems = report.problems.map { "  \(Terminal.safe($0.description))" }.joined(separator: "\n")
            throw ToolFailure("The file would be invalid; nothing was written. [provider_file.invalid]\n\(problems)", status: ToolFailure.inputRefused)
        }
        // The daemon's own warnings (the password grant's RFC 9700 deprecation, an oidc
        // provider without openid), which it would otherwise say only in its log.
        for warning in report.warnings { Terminal.writeError("warning: \(Terminal.safe(warning.description))\n") }
        if let issuer = draft.issuer {
            let offer = try daemon.call(
                .providerDiscover,
                ProviderDiscoverParams(issuer: issuer, caFile: draft.caFile),
                as: ProviderOffer.self,
                progress: "Reading \(issuer)'s discovery document and RFC 8414 metadata…"
            )
            // --dry-run's standard output is the file alone.
            let describe = dryRun ? Terminal.writeError : { print($0, terminator: "") }
            if !daemon.json || dryRun { describe(ProviderDirectory.describe(offer, chosen: draft.grants)) }
            // A device code grant with nowhere to ask for a code would be listed as ready and
            // fail at the first `login --device`.
            if draft.grants.contains(.deviceCode), offer.deviceAuthorizationEndpoint == nil, draft.deviceEndpoint == nil {
                throw ToolFailure(
                    "\(Terminal.safe(issuer)) names no device authorization endpoint, so --grant device_code could not sign in; pass --device-endpoint URL, or leave the grant out. Nothing was written. [provider_file.invalid]",
                    status: ToolFailure.inputRefused
                )
            }
            if let registration { return try register(draft, offer: offer, registration: registration, dryRun: dryRun) }
        }
        if dryRun { return print(draft.json(), terminator: "") }
        do {
            try ProviderFileStore.write(draft.json(), id: id, directory: directory, force: force)
        } catch {
            throw ToolFailure(
                "\(error.message) [\(error.code)]",
                status: error.code == "provider_file.exists" ? ToolFailure.inputRefused : ToolFailure.internalError
            )
        }
        if !daemon.json {
            print("Wrote \(ProviderFileStore.path(id: id.rawValue, directory: directory)).")
            if draft.storage != .persistent {
                print(
                    "Sessions stay in memory: kept across a restart or an upgrade of the daemon, signed out at a stop or a reboot; --storage persistent keeps them sealed on disk."
                )
            }
        }
        try reload(added: true)
    }

    /// Registers a client for `draft` at the provider `offer` describes, then writes the
    /// provider file with its client id, the secret and registration files beside it, and
    /// reloads. With `dryRun`, registers nothing and prints the file with a placeholder id.
    private func register(_ draft: ProviderFileDraft, offer: ProviderOffer, registration: Registration, dryRun: Bool) throws {
        var draft = draft
        let plan = ClientRegistrationPlan(privateKeyJWT: registration.privateKeyJWT)
        if draft.grants.isEmpty { draft.grants = ClientRegistrationPlan.defaultGrants(offer) }
        let initialAccessToken = try ClientRegistrar.initialAccessToken(registration.initialAccessTokenFile)
        let params = plan.request(draft, offer: offer, id: id, caFile: draft.caFile, initialAccessToken: initialAccessToken)
        let summary = plan.summary(params)
        if dryRun {
            Terminal.writeError(
                "--dry-run registers nothing: it would register \(summary) at \(offer.registrationEndpoint.map(Terminal.safe) ?? "(no registration endpoint)"); the file's client_id is a placeholder.\n"
            )
            return print(draft.json(), terminator: "")
        }
        let registered = try ClientRegistrar(daemon: daemon).register(
            draft,
            request: params,
            offer: offer,
            id: id,
            directory: directory,
            caFile: draft.caFile,
            force: force,
            readableBy: daemonReader
        )
        if !daemon.json {
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
            } else if !daemon.json {
                print("Deleted the earlier client \(Terminal.safe(earlier.clientID)) at the provider.")
            }
        }
        try reload(added: true)
    }

    /// The group the secret files are given to: the daemon's, when root writes them for a
    /// daemon that runs as another user (the system unit's `User=authgate`), so that it can read
    /// them (`root:authgate 0640`, as docs/CONFIGURATION.md asks of secret files); `nil` (0600,
    /// the writer's) otherwise.
    private func daemonReader() throws(ToolFailure) -> UInt32? {
        guard geteuid() == 0 else { return nil }
        let info = try daemon.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self)
        guard let uid = info.daemonUID, uid != 0, let gid = info.daemonGID else { return nil }
        return gid
    }

    /// `provider remove` (confirmed): deletes the client `add --register` registered at the
    /// provider, if `ID.registration` says there is one (a refusal stops the removal unless
    /// ``force``), then the files, and reloads.
    package func remove() throws {
        do throws(ToolFailure) {
            if let clientID = try ClientRegistrar(daemon: daemon).deregister(id: id, directory: directory), !daemon.json {
                print("Deleted the client \(Terminal.safe(clientID)) at the provider.")
            }
        } catch {
            guard force else {
                throw ToolFailure(
                    "\(error.description)\nThe client was not deleted at the provider, and nothing was removed: pass --force to remove the files anyway.",
                    status: error.status
                )
            }
            Terminal.writeError("authgate: \(error.description)\nThe client stays registered at the provider; removing the files (--force).\n")
        }
        do {
            try ProviderFileStore.remove(id: id, directory: directory)
            RegisteredClientFiles.removeFiles(id: id, directory: directory)
        } catch {
            throw ToolFailure(
                "\(error.message) [\(error.code)]",
                status: error.code == "provider_file.not_found" ? ToolFailure.inputRefused : ToolFailure.internalError
            )
        }
        if !daemon.json { print("Removed \(ProviderFileStore.path(id: id.rawValue, directory: directory)).") }
        try reload(added: false)
    }

    /// Asks the daemon to read its files again and prints what it did with the provider, which
    /// it must now have loaded (`add`) or no longer have (`remove`): a daemon that reads another
    /// directory than ``directory`` is said, with a failure, never reported as a success.
    private func reload(added: Bool) throws {
        let reports = try daemon.call(.configReload, EmptyResult(), as: [ProviderReloadReport].self, progress: "Reloading…")
        let report = try ProviderDirectory.reloaded(reports, id: id, added: added, directory: directory) {
            try? daemon.call(.daemonInfo, EmptyResult(), as: DaemonInfo.self).configDir
        }
        if daemon.json { return try DaemonConnection.printJSON(reports) }
        print(ProviderDirectory.reloadSentence(report, id: id))
    }
}
