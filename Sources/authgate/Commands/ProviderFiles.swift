import ArgumentParser
import AuthGateCore
import AuthGateTools

#if canImport(Glibc)
import Glibc
#endif

/// `authgate provider add|remove`: provider files for admins.
struct ProviderFiles: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provider",
        abstract: "List, add or remove provider files (admins).",
        subcommands: [List.self, Add.self, Remove.self, ProviderTest.self]
    )

    /// Where the provider files go.
    struct Location: ParsableArguments {
        @Option(
            help: ArgumentHelp(
                "The providers directory (default: the one the daemon reads, as `authgate info` shows it).",
                valueName: "dir"
            )
        )
        var providersDir: String?

        /// `--providers-dir`, else the directory the daemon says it reads.
        func directory(_ global: GlobalOptions) throws -> String {
            try providersDir ?? ProviderFileChange.daemonDirectory(global.daemon)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the files of the providers directory: each file's path, whether it is valid, and the daemon's status for it."
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var location: Location

        func run() throws {
            let directory = try location.directory(global)
            let (listings, daemonAnswered) = try ProviderDirectory.listings(directory: directory, daemon: global.daemon)
            if global.json { return try global.printJSON(listings) }
            print(ProviderDirectory.text(listings, daemonAnswered: daemonAnswered, directory: directory))
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a provider file into the providers directory and make the daemon load it.",
            discussion: """
                Every answer is a flag, so it runs unattended (Ansible and friends); on a terminal, the \
                issuer or preset, the client id, the grants and the scopes not given are asked for. The file is checked \
                by the daemon's own rules before it is written (atomically), never replaces an existing \
                file without --force, and the daemon is asked to reload. Secrets stay in their own files: \
                --client-secret-file names one, the JSON never holds a secret.

                --register registers a public client at the issuer's registration endpoint (RFC 7591, \
                through the daemon): the redirect URI http://127.0.0.1/callback (any port, RFC 8252), the \
                authorization_code and refresh_token grants and device_code when the provider offers it \
                (or the --grant ones). The file gets the client id the provider assigned; a client secret, \
                if one is issued, goes to ID.client-secret, and the registration_client_uri and \
                registration_access_token (RFC 7592) to ID.registration, both 0600 beside the file, so \
                that provider remove can delete the client at the provider. With --private-key-jwt the \
                client is confidential instead: the daemon generates an ES256 key, registers its public \
                JWK, and the private key goes to ID.key (0600). --dry-run registers nothing.
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var location: Location

        @Argument(help: "The provider's id: the file is ID.json.")
        var name: String

        @Option(help: ArgumentHelp("A preset: \(ProviderPreset.allCases.map(\.rawValue).joined(separator: ", ")) (docs/PROVIDERS.md).", valueName: "name"))
        var preset: String?

        @Option(help: "The preset's host (github, gitlab, gitea, forgejo, okta, keycloak, auth0).")
        var host: String?

        @Option(help: "The preset's tenant (entra).")
        var tenant: String?

        @Option(help: "The preset's realm (keycloak).")
        var realm: String?

        @Option(help: "The preset's authorization server (okta).")
        var authorizationServer: String?

        @Option(
            help: ArgumentHelp(
                "The issuer URL of an OpenID Connect provider: the daemon reads its discovery document and what it offers is printed (on standard error with --dry-run) before the file is written.",
                valueName: "url"
            )
        )
        var issuer: String?

        @Option(help: "The client id registered at the provider.")
        var clientID: String?

        @Option(help: ArgumentHelp("An absolute path to a file holding the client secret.", valueName: "path"))
        var clientSecretFile: String?

        @Flag(help: "Register a client at the issuer's registration endpoint (RFC 7591) instead of --client-id.")
        var register = false

        @Option(help: ArgumentHelp("A file holding the initial access token the provider demands for --register.", valueName: "path"))
        var initialAccessTokenFile: String?

        @Flag(help: "With --register: a confidential client that signs private_key_jwt assertions (RFC 7523) with a key the daemon generates (ID.key).")
        var privateKeyJWT = false

        @Option(name: .customLong("grant"), help: "A grant (repeatable): password, device_code, authorization_code, client_credentials.")
        var grants: [String] = []

        @Option(name: .customLong("scope"), help: "A scope asked for by default (repeatable).")
        var scopes: [String] = []

        @Option(help: ArgumentHelp("A PEM bundle of CAs to trust for this provider (tls.ca_file).", valueName: "path"))
        var caFile: String?

        @Option(
            help: ArgumentHelp(
                "The device authorization endpoint (endpoints.device_authorization), for --grant device_code at a provider whose discovery document names none.",
                valueName: "url"
            )
        )
        var deviceEndpoint: String?

        @Option(
            help: ArgumentHelp(
                "The revocation endpoint (endpoints.revocation, RFC 7009), where sign-outs revoke the tokens, for a provider whose discovery and RFC 8414 metadata name none.",
                valueName: "url"
            )
        )
        var revocationEndpoint: String?

        @Option(
            name: .customLong("credential-host"),
            help: ArgumentHelp(
                "A host (host[:port], optionally /path-prefix) git's and docker's credential helpers serve with this provider's token (repeatable; credential_helper).",
                valueName: "host[/path]"
            )
        )
        var credentialHosts: [String] = []

        @Option(help: "memory or persistent.")
        var storage: String?

        @Flag(help: "Replace an existing file (with --register, the client registered for it is deleted at the provider once the new one is written).")
        var force = false

        @Flag(help: "Print the file instead of writing it.")
        var dryRun = false

        func run() throws {
            let id = try ProviderFileChange.id(name)
            var answers = ProviderFileAnswers(
                preset: preset,
                host: host,
                tenant: tenant,
                realm: realm,
                authorizationServer: authorizationServer,
                issuer: issuer,
                clientID: clientID,
                clientSecretFile: clientSecretFile,
                register: register,
                initialAccessTokenFile: initialAccessTokenFile,
                privateKeyJWT: privateKeyJWT,
                grants: grants,
                scopes: scopes,
                caFile: caFile,
                deviceEndpoint: deviceEndpoint,
                revocationEndpoint: revocationEndpoint,
                credentialHosts: credentialHosts,
                storage: storage
            )
            try answers.checkRegistration()
            // On a terminal, the answers not given as flags are asked for; otherwise (Ansible
            // and friends) the file is made of the flags alone.
            if Terminal.stdinIsTerminal { answers.askForMissing(Terminal.ask) }
            let draft = try answers.draft(schema: ProviderDirectory.installedSchema())
            let change = ProviderFileChange(id: id, directory: try location.directory(global), force: force, daemon: global.daemon)
            try change.add(draft, registration: answers.registration, dryRun: dryRun)
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a provider file and make the daemon unload it (its sessions are signed out).",
            discussion: """
                A client that provider add --register registered (ID.registration beside the file) is \
                deleted at the provider first (RFC 7592, through the daemon), then ID.json, \
                ID.registration, ID.client-secret and ID.key. When the provider refuses the delete, nothing is \
                removed unless --force.
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var location: Location

        @Argument(help: "The provider's id.")
        var name: String

        @Flag(help: "Do not ask for confirmation.")
        var yes = false

        @Flag(help: "Remove the files even when the provider refuses to delete the dynamically registered client.")
        var force = false

        func run() throws {
            let change = ProviderFileChange(id: try ProviderFileChange.id(name), directory: try location.directory(global), force: force, daemon: global.daemon)
            let path = ProviderFileStore.path(id: change.id.rawValue, directory: change.directory)
            if !yes {
                guard isatty(STDIN_FILENO) == 1 else {
                    throw ToolFailure("Removing \(path) needs confirmation: pass --yes. [provider_file.unconfirmed]", status: ToolFailure.inputRefused)
                }
                Terminal.writeError("Remove \(path) and sign out of its sessions? [y/N] ")
                guard let answer = readLine(), answer.lowercased().hasPrefix("y") else {
                    throw ToolFailure("Nothing was removed. [provider_file.unconfirmed]", status: ToolFailure.inputRefused)
                }
            }
            try change.remove()
        }
    }
}
