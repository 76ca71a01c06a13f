import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Foundation
import Logging

@testable import AuthGateOAuth

#if canImport(Glibc)
import Glibc
#endif

/// A provider's endpoints as a transport: each endpoint answers from its own script, in order
/// (a 500 when its script is used up), so requests that run side by side (discovery and the
/// RFC 8414 document) get their own answers. It keeps every request.
final class ScriptedProvider: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var scripts: [HTTPRequest.Endpoint: [HTTPResponse]]
    private var sent: [HTTPRequest] = []

    init(_ scripts: [HTTPRequest.Endpoint: [HTTPResponse]] = [:]) { self.scripts = scripts }

    func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse {
        lock.withLock {
            sent.append(request)
            guard var script = scripts[request.endpoint], !script.isEmpty else { return HTTPResponse(status: 500) }
            let answer = script.removeFirst()
            scripts[request.endpoint] = script
            return answer
        }
    }

    /// Adds answers to an endpoint's script.
    func script(_ endpoint: HTTPRequest.Endpoint, _ answers: HTTPResponse...) {
        lock.withLock { scripts[endpoint, default: []] += answers }
    }

    /// The requests sent to `endpoint`, in order.
    func requests(to endpoint: HTTPRequest.Endpoint) -> [HTTPRequest] {
        lock.withLock { sent.filter { $0.endpoint == endpoint } }
    }

    /// The form fields of the `index`th request to `endpoint`, decoded.
    func form(_ endpoint: HTTPRequest.Endpoint, _ index: Int = 0) -> [String: String] {
        let requests = requests(to: endpoint)
        guard index < requests.count else { return [:] }
        return Self.form(String(decoding: requests[index].body, as: UTF8.self))
    }

    static func form(_ text: String) -> [String: String] {
        text.split(separator: "&").reduce(into: [:]) { fields, pair in
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            fields[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
    }
}

/// A JSON answer.
func json(_ status: Int, _ body: String, headers: [String: String] = [:]) -> HTTPResponse {
    HTTPResponse(status: status, headers: headers.merging(["content-type": "application/json"]) { first, _ in first }, body: Array(body.utf8))
}

/// An RFC 6749 §5.2 error answer.
func oauthError(_ error: String, status: Int = 400, description: String? = nil) -> HTTPResponse {
    json(status, #"{"error":"\#(error)"\#(description.map { #","error_description":"\#($0)""# } ?? "")}"#)
}

/// A token answer with access token `token`.
func tokens(_ token: String = "at-1", extra: String = "") -> HTTPResponse {
    json(200, #"{"access_token":"\#(token)","token_type":"Bearer","expires_in":300\#(extra)}"#)
}

/// A provider of `type` read from a provider file (the loader's checks included) whose
/// client secret is in a file of its own, and the scripted transport it talks to.
struct ProviderUnderTest {
    let provider: RemoteIdentityProvider
    let transport: ScriptedProvider
    let scratch: ScratchDirectory

    /// - Parameter file: The provider file's members besides `client_secret_file`.
    init(_ file: String, transport: ScriptedProvider = ScriptedProvider(), now: @escaping @Sendable () -> Date = { Date() }) throws {
        scratch = try ScratchDirectory()
        try scratch.write("secret", "s3cret\n")
        chmod(scratch.path + "/secret", 0o600)
        let document = "{" + #""client_secret_file":"\#(scratch.path)/secret","# + file.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst()
        let report = ProviderConfigurationLoader.parse(Data(document.utf8), id: "corp", file: "corp.json")
        guard let configuration = report.configuration else { throw TestFailure("\(report.problems)") }
        self.transport = transport
        provider = try RemoteIdentityProvider(configuration: configuration, transport: transport, now: now, logger: Logger(label: "test"))
    }

    /// An oauth2 provider with every endpoint and grant a person's sign-in uses.
    static func oauth2(transport: ScriptedProvider = ScriptedProvider()) throws -> ProviderUnderTest {
        try ProviderUnderTest(
            """
            {
              "type": "oauth2",
              "endpoints": {
                "token": "https://idp.example.test/token", "authorization": "https://idp.example.test/authorize",
                "device_authorization": "https://idp.example.test/device", "revocation": "https://idp.example.test/revoke"
              },
              "client_id": "cli",
              "grants": ["password", "device_code", "authorization_code", "client_credentials"],
              "scopes": ["read", "write"]
            }
            """,
            transport: transport
        )
    }
}
