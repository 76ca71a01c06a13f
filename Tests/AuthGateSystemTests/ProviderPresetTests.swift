import AuthGateCore
import AuthGateTestSupport
import Foundation
import Testing

/// `"preset"` in a provider file (docs/PROVIDERS.md): each preset's file is valid for the
/// loader and for docs/provider.schema.json, and fills what the provider's documentation says.
@Suite("Provider presets")
struct ProviderPresetTests {
    /// Each preset with options, and what the file must then say.
    static let presets: [(file: String, check: @Sendable (ProviderConfiguration) -> Bool)] = [
        (
            #"{"preset": "github", "client_id": "Iv1.abc"}"#,
            { configuration in
                let remote = configuration.settings.remote
                return configuration.kind == .oauth2 && remote?.endpoints.token?.absoluteString == "https://github.com/login/oauth/access_token"
                    && remote?.endpoints.userinfo?.absoluteString == "https://api.github.com/user" && remote?.grants == [.deviceCode]
                    && remote?.quirks.missingLifetime == .never && remote?.quirks.tokenErrorsWithHTTP200 == true
                    && configuration.credentialHelper == .init(hosts: ["github.com"], username: "oauth2")
            }
        ),
        (
            #"{"preset": "github", "preset_options": {"host": "github.example.com"}, "client_id": "Iv1.abc"}"#,
            { configuration in
                configuration.settings.remote?.endpoints.userinfo?.absoluteString == "https://github.example.com/api/v3/user"
            }
        ),
        (
            #"{"preset": "gitlab", "client_id": "abc"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://gitlab.com" && configuration.credentialHelper?.username == "oauth2"
            }
        ),
        (
            #"{"preset": "gitea", "preset_options": {"host": "gitea.example.com"}, "client_id": "abc"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://gitea.example.com/"
                    && configuration.credentialHelper?.hosts == ["gitea.example.com"]
            }
        ),
        (
            #"{"preset": "forgejo", "preset_options": {"host": "codeberg.org"}, "client_id": "abc"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://codeberg.org/"
            }
        ),
        (
            #"{"preset": "google", "client_id": "1-abc.apps.googleusercontent.com", "client_secret_file": "/etc/authgate/secrets/google"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://accounts.google.com"
                    && configuration.settings.remote?.quirks.authorizationParameters == [
                        .init(name: "access_type", value: "offline"), .init(name: "prompt", value: "consent"),
                    ]
            }
        ),
        (
            #"{"preset": "entra", "client_id": "00000000-0000-0000-0000-000000000000"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://login.microsoftonline.com/organizations/v2.0"
                    && configuration.settings.remote?.quirks.issuerTemplate == "https://login.microsoftonline.com/{tenantid}/v2.0"
                    && configuration.scopes.contains("offline_access")
            }
        ),
        (
            #"{"preset": "entra", "preset_options": {"tenant": "contoso.onmicrosoft.com"}, "client_id": "0"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0"
                    && configuration.settings.remote?.quirks.issuerTemplate == nil
            }
        ),
        (
            #"{"preset": "entra", "preset_options": {"tenant": "consumers"}, "client_id": "0"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0"
            }
        ),
        (
            #"{"preset": "okta", "preset_options": {"host": "example.okta.com", "authorization_server": "default"}, "client_id": "abc"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://example.okta.com/oauth2/default"
            }
        ),
        (
            #"{"preset": "keycloak", "preset_options": {"host": "sso.example.com:8443", "realm": "corp"}, "client_id": "abc"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://sso.example.com:8443/realms/corp"
            }
        ),
        (
            #"{"preset": "auth0", "preset_options": {"host": "example.us.auth0.com"}, "client_id": "abc", "audience": "https://api.example.com"}"#,
            { configuration in
                configuration.settings.remote?.issuer?.absoluteString == "https://example.us.auth0.com/"
                    && configuration.settings.remote?.audience == "https://api.example.com"
            }
        ),
        // The file's own keys win; objects are merged key by key.
        (
            #"{"preset": "github", "client_id": "a", "scopes": ["read:user"], "endpoints": {"userinfo": "https://api.example.com/me"}, "credential_helper": {"username": "me"}}"#,
            { configuration in
                configuration.scopes == ["read:user"] && configuration.settings.remote?.endpoints.userinfo?.absoluteString == "https://api.example.com/me"
                    && configuration.settings.remote?.endpoints.token?.absoluteString == "https://github.com/login/oauth/access_token"
                    && configuration.credentialHelper == .init(hosts: ["github.com"], username: "me")
            }
        ),
    ]

    @Test("every preset gives a file the loader accepts with the provider's documented settings, and the schema accepts it too")
    func presetsValidate() throws {
        #expect(
            Set(Self.presets.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.file.utf8)) as? [String: Any])?["preset"] as? String })
                == Set(ProviderPreset.allCases.map(\.rawValue)),
            "every preset is tried"
        )
        for (file, check) in Self.presets {
            let report = ProviderConfigurationLoader.parse(Data(file.utf8), id: "p", file: "providers.d/p.json")
            let configuration = try #require(report.configuration, "\(file): \(report.problems)")
            #expect(check(configuration), "\(file)")
        }
        let documents = try Self.presets.map { try JSONSerialization.jsonObject(with: Data($0.file.utf8)) }
        for (preset, errors) in zip(Self.presets, try ProviderSchemaTests.schemaErrors(documents)) {
            #expect(errors.isEmpty, "\(preset.file): \(errors)")
        }
    }

    static let mistakes: [(String, String)] = [
        (
            #"{"preset": "keycloak", "preset_options": {"host": "sso.example.com"}, "client_id": "a"}"#,
            #"$.preset_options.realm: required by the "keycloak" preset"#
        ),
        (
            #"{"preset": "google", "preset_options": {"host": "google.com"}, "client_id": "a"}"#,
            #"$.preset_options.host: unknown key for preset_options of the "google" preset"#
        ),
        (
            #"{"preset": "gitea", "preset_options": {"host": "https://gitea.example.com"}, "client_id": "a"}"#,
            #"$.preset_options.host: must be a lowercase host name with an optional :port, without a scheme or path, found "https://gitea.example.com""#
        ),
        (
            #"{"preset": "okta", "preset_options": {"host": "example.okta.com", "authorization_server": "a/b"}, "client_id": "a"}"#,
            #"$.preset_options.authorization_server: must be 1–128 letters, digits, -, _ or ., found "a/b""#
        ),
        (
            #"{"preset": "bitbucket", "type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"]}"#,
            #"$.preset: expected one of "github", "gitlab", "gitea", "forgejo", "google", "entra", "okta", "keycloak", "auth0", found "bitbucket""#
        ),
        (
            #"{"type": "oauth2", "preset_options": {"host": "a.example"}, "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"]}"#,
            "$.preset_options: applies only with preset"
        ),
        (#"{"preset": "gitlab"}"#, "$.client_id: required: the OAuth client id registered at the provider"),
    ]

    @Test("a mistake in a preset file names the field, and the schema refuses the file too", arguments: mistakes)
    func mistake(_ file: String, _ expected: String) throws {
        let report = ProviderConfigurationLoader.parse(Data(file.utf8), id: "p", file: "providers.d/p.json")
        #expect(report.configuration == nil)
        #expect(report.problems.map { "\($0.path): \($0.message)" }.contains(expected), "\(report.problems)")
        let errors = try ProviderSchemaTests.schemaErrors([try JSONSerialization.jsonObject(with: Data(file.utf8))])
        #expect(errors.first?.isEmpty == false, "the schema refuses \(file)")
    }
}
