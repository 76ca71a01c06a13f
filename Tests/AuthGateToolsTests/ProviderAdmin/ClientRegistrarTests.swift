import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `provider add --register`'s steps (ClientRegistrar) in process, against a stand-in daemon:
/// which calls it makes, which files it leaves, and what undoes a registration no file names.
/// The registration itself is tested against idpyoidc (ProviderFileCommandTests+Registration).
@Suite("Registering a client and writing its files (ClientRegistrar)")
struct ClientRegistrarTests {
    private let id = ProviderID("corp")!

    private func offer(registration: Bool = true) -> ProviderOffer {
        ProviderOffer(
            issuer: "https://sso.example.com",
            tokenEndpoint: "https://sso.example.com/token",
            authorizationEndpoint: "https://sso.example.com/authorize",
            deviceAuthorizationEndpoint: "https://sso.example.com/device",
            pushedAuthorizationRequestEndpoint: nil,
            requirePushedAuthorizationRequests: false,
            registrationEndpoint: registration ? "https://sso.example.com/register" : nil,
            grantTypes: nil,
            grants: [.authorizationCode, .deviceCode, .clientCredentials],
            codeChallengeMethods: ["S256"],
            dpopSigningAlgs: [],
            tokenEndpointAuthMethods: [],
            scopes: []
        )
    }

    /// The draft and request `provider add --register --grant …` makes.
    private func draft(_ grants: [Grant], directory: String) -> (ProviderFileDraft, ProviderRegisterParams) {
        var draft = ProviderFileDraft()
        draft.issuer = "https://sso.example.com"
        draft.grants = grants
        let plan = ClientRegistrationPlan(privateKeyJWT: false)
        plan.prepare(&draft, id: id.rawValue, directory: directory)
        return (draft, plan.request(draft, offer: offer(), id: id, caFile: nil, initialAccessToken: nil))
    }

    private func registration(_ clientID: String, secret: String? = nil, granting grants: [String]) -> ProviderRegistration {
        ProviderRegistration(
            clientID: clientID,
            clientSecret: secret,
            clientSecretExpiresAt: nil,
            registrationClientURI: "https://sso.example.com/register/\(clientID)",
            registrationAccessToken: "rat-\(clientID)",
            registrationEndpoint: "https://sso.example.com/register",
            grantTypes: grants,
            redirectURIs: nil,
            tokenEndpointAuthMethod: nil,
            scope: nil
        )
    }

    /// A daemon that registers `registered` (in turn, one per provider.register) and deletes
    /// each client asked, or refuses with `refusal`.
    private func daemon(
        _ scratch: ScratchDirectory,
        registering registered: [ProviderRegistration],
        refusal: AuthGateError? = nil
    ) throws
        -> StandInDaemon
    {
        let answers = try registered.map { String(decoding: try RPCCoding.makeEncoder().encode($0), as: UTF8.self) }
        let refused = try refusal.map { String(decoding: try RPCCoding.makeEncoder().encode(RPCErrorObject($0)), as: UTF8.self) }
        // How many registrations were answered: one character each (the answers go in turn).
        let answered = SharedText()
        return try StandInDaemon(in: scratch.path) { method, id in
            switch method {
            case "provider.register":
                let index = answered.text.count
                answered.append(Data("x".utf8))
                return #"{"jsonrpc":"2.0","id":\#(id),"result":\#(answers[min(index, answers.count - 1)])}"#
            case "provider.deregister":
                return refused.map { #"{"jsonrpc":"2.0","id":\#(id),"error":\#($0)}"# } ?? #"{"jsonrpc":"2.0","id":\#(id),"result":{"deleted":true}}"#
            default:
                return #"{"jsonrpc":"2.0","id":\#(id),"error":{"code":-32601,"message":"not here"}}"#
            }
        }
    }

    private func registrar(_ daemon: StandInDaemon) -> ClientRegistrar {
        ClientRegistrar(daemon: DaemonConnection(socket: daemon.path, json: false))
    }

    private func methods(_ daemon: StandInDaemon) -> [String] {
        daemon.requests.compactMap { $0.firstMatch(of: /"method":"([^"]+)"/).map { String($0.1) } }
    }

    @Test("the file gets the issued client id and only the granted grants; the secret and the registration go to 0600 files, never into the file")
    func registersAndWrites() throws {
        let scratch = try ScratchDirectory()
        let providers = scratch.path + "/providers.d"
        try FileManager.default.createDirectory(atPath: providers, withIntermediateDirectories: true)
        let daemon = try daemon(scratch, registering: [registration("c-42", secret: "s3cret-value", granting: ["authorization_code", "client_credentials"])])
        let (draft, request) = draft([.authorizationCode, .deviceCode, .clientCredentials], directory: providers)
        let registered = try registrar(daemon).register(
            draft,
            request: request,
            offer: offer(),
            id: id,
            directory: providers,
            caFile: nil,
            force: false
        ) { nil }

        #expect(methods(daemon) == ["provider.register"])
        #expect(registered.refused == [.deviceCode] && registered.asked == [.authorizationCode, .deviceCode, .clientCredentials])
        #expect(registered.earlier == nil && registered.path == providers + "/corp.json")
        let file = try String(contentsOfFile: registered.path, encoding: .utf8)
        #expect(file.contains(#""client_id" : "c-42""#) || file.contains(#""client_id": "c-42""#), "\(file)")
        #expect(!file.contains("device_code") && !file.contains("s3cret-value") && !file.contains("rat-c-42"), "\(file)")
        #expect(try String(contentsOfFile: providers + "/corp.client-secret", encoding: .utf8).contains("s3cret-value"))
        let record = try #require(RegisteredClientFiles.record(id: id, directory: providers))
        #expect(record.clientID == "c-42" && record.registrationAccessToken == "rat-c-42")
        for name in ["corp.client-secret", "corp.registration"] {
            var status = stat()
            #expect(stat(providers + "/" + name, &status) == 0 && status.st_mode & 0o777 == 0o600, "\(name)")
        }
    }

    @Test("a client no usable file can be written for (client credentials, but no secret issued) is deleted again at the provider; no file is left")
    func undoesARegistrationNoFileNames() throws {
        let scratch = try ScratchDirectory()
        let daemon = try daemon(scratch, registering: [registration("c-7", granting: ["client_credentials"])])
        let (draft, request) = draft([.clientCredentials], directory: scratch.path)
        #expect {
            try registrar(daemon).register(draft, request: request, offer: offer(), id: id, directory: scratch.path, caFile: nil, force: false) { nil }
        } throws: { error in
            (error as? ToolFailure)?.description.contains("[provider_file.invalid]") == true
        }
        #expect(methods(daemon) == ["provider.register", "provider.deregister"])
        let deregistration = daemon.requests.last?.replacingOccurrences(of: #"\/"#, with: "/") ?? ""
        #expect(deregistration.contains(#""registration_client_uri":"https://sso.example.com/register/c-7""#), "\(deregistration)")
        #expect(daemon.requests.last?.contains("rat-c-7") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path) == ["s.sock"])
    }

    @Test("nothing is registered when the file exists (without --force) or the provider has no registration endpoint")
    func refusesBeforeRegistering() throws {
        let scratch = try ScratchDirectory()
        let daemon = try daemon(scratch, registering: [registration("c-1", granting: ["authorization_code"])])
        let (draft, request) = draft([.authorizationCode], directory: scratch.path)
        try scratch.write("corp.json", "{}")
        #expect {
            try registrar(daemon).register(draft, request: request, offer: offer(), id: id, directory: scratch.path, caFile: nil, force: false) { nil }
        } throws: { error in
            (error as? ToolFailure).map { $0.description.contains("[provider_file.exists]") && $0.status == ToolFailure.inputRefused } == true
        }
        #expect {
            try registrar(daemon).register(
                draft,
                request: request,
                offer: offer(registration: false),
                id: id,
                directory: scratch.path,
                caFile: nil,
                force: true
            ) {
                nil
            }
        } throws: { error in
            (error as? ToolFailure).map { $0.description.contains("[unsupported_grant]") && $0.status == ToolFailure.providerUnusable } == true
        }
        #expect(daemon.requests.isEmpty)
        #expect(try String(contentsOfFile: scratch.path + "/corp.json", encoding: .utf8) == "{}")
    }

    @Test("--force over a registered client: the earlier one is deleted once the new file is written; a refused delete is reported and the new files stay")
    func replacesAnEarlierClient() throws {
        let scratch = try ScratchDirectory()
        let (draft, request) = draft([.authorizationCode], directory: scratch.path)
        let first = try daemon(
            scratch,
            registering: [registration("c-old", granting: ["authorization_code"]), registration("c-new", granting: ["authorization_code"])]
        )
        _ = try registrar(first).register(draft, request: request, offer: offer(), id: id, directory: scratch.path, caFile: nil, force: false) { nil }
        let replaced = try registrar(first).register(draft, request: request, offer: offer(), id: id, directory: scratch.path, caFile: nil, force: true) { nil }
        #expect(replaced.earlier?.clientID == "c-old" && replaced.earlier?.failure == nil)
        #expect(methods(first) == ["provider.register", "provider.register", "provider.deregister"])
        #expect(first.requests.last?.contains("rat-c-old") == true)
        #expect(RegisteredClientFiles.record(id: id, directory: scratch.path)?.clientID == "c-new")

        try FileManager.default.removeItem(atPath: first.path)
        let refusing = try daemon(
            scratch,
            registering: [registration("c-newer", granting: ["authorization_code"])],
            refusal: AuthGateError(.registrationRefused, "The provider refused to delete the client.")
        )
        let again = try registrar(refusing).register(draft, request: request, offer: offer(), id: id, directory: scratch.path, caFile: nil, force: true) { nil }
        #expect(again.earlier?.clientID == "c-new")
        #expect(again.earlier?.failure?.description.contains("[registration_refused]") == true, "\(String(describing: again.earlier?.failure))")
        #expect(RegisteredClientFiles.record(id: id, directory: scratch.path)?.clientID == "c-newer")
    }

    @Test("remove: no registration file, nothing to delete; one authgate did not write refuses, asking for --force")
    func deregisterByFile() throws {
        let scratch = try ScratchDirectory()
        let daemon = try daemon(scratch, registering: [])
        #expect(try registrar(daemon).deregister(id: id, directory: scratch.path) == nil)
        try scratch.write("corp.registration", #"{"client_id": 3}"#)
        #expect {
            try registrar(daemon).deregister(id: id, directory: scratch.path)
        } throws: { error in
            (error as? ToolFailure).map { $0.description.contains("Pass --force") && $0.status == ToolFailure.inputRefused } == true
        }
        #expect(daemon.requests.isEmpty)
    }
}
