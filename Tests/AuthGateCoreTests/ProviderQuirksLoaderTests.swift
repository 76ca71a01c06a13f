import AuthGateCore
import Foundation
import Testing

/// The provider-file keys for providers' documented quirks (docs/CONFIGURATION.md, "Provider
/// quirks"): read into ``ProviderQuirks``, each mistake reported with its file and field.
@Suite("Provider quirk keys")
struct ProviderQuirksLoaderTests {
    private static let base =
        #""type": "oidc", "issuer": "https://login.example.com/organizations/v2.0", "client_id": "a", "grants": ["authorization_code"], "scopes": ["openid"]"#

    private static func load(_ keys: String, base: String = base) -> ProviderFileReport {
        ProviderConfigurationLoader.parse(Data("{\(base), \(keys)}".utf8), id: "corp", file: "providers.d/corp.json")
    }

    @Test("every quirk key is read; absent, the RFC behaviour (an hour without expires_in)")
    func read() throws {
        let report = Self.load(
            #""expires_in_default": "never", "token_errors_with_http_200": true, "$schema": "https://authgate.example/provider.schema.json", "issuer_template": "https://login.example.com/{tenantid}/v2.0", "authorization_parameters": {"prompt": "consent", "access_type": "offline"}, "userinfo_claims": {"sub": "id", "preferred_username": "login"}"#
        )
        let quirks = try #require(report.configuration?.settings.remote?.quirks, "\(report.problems)")
        #expect(quirks.missingLifetime == .never)
        #expect(quirks.tokenErrorsWithHTTP200)
        #expect(quirks.issuerTemplate == "https://login.example.com/{tenantid}/v2.0")
        #expect(quirks.authorizationParameters == [.init(name: "access_type", value: "offline"), .init(name: "prompt", value: "consent")])
        #expect(quirks.userinfoClaims == ["sub": "id", "preferred_username": "login"])
        // A number becomes its decimal string; a claim the answer has is kept; an odd value is left out.
        let github: [String: JSONValue] = ["id": .number(583231), "login": .string("octocat"), "preferred_username": .string("kept")]
        #expect(quirks.standardizing(github)["sub"] == .string("583231") && quirks.standardizing(github)["preferred_username"] == .string("kept"))
        #expect(quirks.standardizing(["id": .number(1.5)])["sub"] == nil)
        #expect(Self.load(#""expires_in_default": 600"#).configuration?.settings.remote?.quirks.missingLifetime == .seconds(600))
        #expect(Self.load(#""audience": "x""#).configuration?.settings.remote?.quirks == ProviderQuirks())
        #expect(ProviderQuirks().missingLifetime == .seconds(3600))
    }

    static let mistakes: [(String, [String])] = [
        (#""expires_in_default": "forever""#, [#"$.expires_in_default: expected a number of seconds or "never", found "forever""#]),
        (#""expires_in_default": 0"#, ["$.expires_in_default: must be between 1 and 31536000"]),
        (#""expires_in_default": true"#, [#"$.expires_in_default: expected a number of seconds or "never", found a boolean"#]),
        (#""token_errors_with_http_200": "yes""#, ["$.token_errors_with_http_200: expected true or false, found a string"]),
        (
            #""issuer_template": "https://login.example.com/common/v2.0""#,
            [#"$.issuer_template: must contain {tenantid}, found "https://login.example.com/common/v2.0""#]
        ),
        (
            #""issuer_template": "http://login.example.com/{tenantid}/v2.0""#,
            [#"$.issuer_template: must be an https URL with {tenantid} in its path, found "http://login.example.com/{tenantid}/v2.0""#]
        ),
        (
            #""authorization_parameters": {"state": "x", "audience": "api", "access_type": 1}"#,
            [
                "$.authorization_parameters.state: is set by authgate itself and cannot be overridden",
                #"$.authorization_parameters.audience: use the provider's "audience" key instead"#,
                "$.authorization_parameters.access_type: expected a string, found a number",
            ]
        ),
        (#""authorization_parameters": ["access_type=offline"]"#, ["$.authorization_parameters: expected an object, found an array"]),
        (#""$schema": 3"#, ["$.$schema: expected a string, found a number"]),
        (
            #""userinfo_claims": {"uid": "id", "sub": 7, "name": "", "email": "e\u0007"}"#,
            [
                #"$.userinfo_claims.uid: expected one of "email", "name", "preferred_username", "sub""#,
                "$.userinfo_claims.sub: expected a string, found a number",
                "$.userinfo_claims.name: must not be empty",
                "$.userinfo_claims.email: a member name is at most 128 printable characters",
            ]
        ),
        (#""userinfo_claims": "id""#, ["$.userinfo_claims: expected an object, found a string"]),
    ]

    @Test("each mistake in a quirk key names the file, the field and what was expected", arguments: mistakes)
    func mistake(_ keys: String, _ expected: [String]) {
        let report = Self.load(keys)
        #expect(report.configuration == nil)
        #expect(Set(report.problems.map { "\($0.path): \($0.message)" }) == Set(expected))
        #expect(report.problems.allSatisfy { $0.file == "providers.d/corp.json" })
    }

    @Test("issuer_template belongs to oidc providers")
    func templateNeedsOIDC() {
        let report = Self.load(
            #""issuer_template": "https://login.example.com/{tenantid}/v2.0""#,
            base: #""type": "oauth2", "endpoints": {"token": "https://a.example/t"}, "client_id": "a", "grants": ["password"]"#
        )
        #expect(
            report.problems.map { "\($0.path): \($0.message)" } == [
                #"$.issuer_template: applies only to a provider of type "oidc" (it checks discovery and ID tokens)"#
            ]
        )
    }

    @Test(
        "the tenant filling an issuer template must look like a tenant id",
        arguments: [
            ("9188040d-6c67-4c5b-b112-36a304b66dad", "https://l.example/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0"),
            ("contoso.onmicrosoft.com", "https://l.example/contoso.onmicrosoft.com/v2.0"),
            ("../evil", nil), ("", nil), ("a/b", nil),
        ]
    )
    func tenant(_ tenant: String, _ issuer: String?) {
        #expect(ProviderQuirks.issuer("https://l.example/{tenantid}/v2.0", tenant: tenant) == issuer)
    }
}
