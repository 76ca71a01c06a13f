import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The CLI's text on a terminal")
struct TerminalTextTests {
    @Test("what the daemon sends is printed with its control characters shown, never run")
    func safe() {
        #expect(Terminal.safe("ok\u{1B}]52;c;aGk=\u{07}\r\nX") == #"ok\u{1B}]52;c;aGk=\u{7}\u{D}\u{A}X"#)
        #expect(Terminal.safe("plain text, ünïcode") == "plain text, ünïcode")
    }

    @Test("a table's columns are aligned on the widest cell, the last one unpadded, every cell made safe")
    func table() {
        let text = Terminal.table(["PROVIDER", "STATE"], [["corp", "authenticated"], ["a-much-longer-id", "login\u{1B}[2J"]])
        #expect(text.split(separator: "\n") == ["PROVIDER          STATE", "corp              authenticated", #"a-much-longer-id  login\u{1B}[2J"#])
    }

    @Test(
        "a sign-out says whether the provider revoked the tokens or they were only forgotten here, and why, the daemon's message made safe",
        arguments: [
            (LogoutResult(removed: true, revocation: RevocationReport(.revoked)), "Signed out of lab: the provider revoked the tokens."),
            (
                LogoutResult(removed: true, revocation: RevocationReport(.notOffered)),
                "Signed out of lab: the tokens were only forgotten here (the provider has no revocation endpoint) and stay valid until they expire."
            ),
            (
                LogoutResult(removed: true, revocation: RevocationReport(.refused(status: 400))),
                "Signed out of lab: the tokens were only forgotten here, as the provider did not revoke them (The provider answered HTTP 400.); they stay valid until they expire."
            ),
            (
                LogoutResult(removed: true, revocation: RevocationReport(status: .failed, message: "lab\u{1B}[2J is unreachable")),
                #"Signed out of lab: the tokens were only forgotten here, as the provider did not revoke them (lab\u{1B}[2J is unreachable); they stay valid until they expire."#
            ),
            (
                LogoutResult(removed: true, revocation: RevocationReport(.unknown)),
                "Signed out of lab: the tokens were forgotten here; the provider does not say whether it revoked them."
            ),
            (LogoutResult(removed: true), "Signed out of lab; the session held no tokens to revoke."),
            (LogoutResult(removed: false), "You had no session with lab; nothing to do."),
        ]
    )
    func signOut(result: LogoutResult, sentence: String) {
        #expect(SignOutSentence.text(result, provider: "lab") == sentence)
    }

    @Test("dates: local time with a rounded distance either way; never for a token without expiry")
    func dates() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(Terminal.describe(now.addingTimeInterval(45), now: now).hasSuffix(" (in 45 s)"))
        #expect(Terminal.describe(now.addingTimeInterval(-150), now: now).hasSuffix(" (3 min ago)"))
        #expect(Terminal.describe(now.addingTimeInterval(5400), now: now).hasSuffix(" (in 2 h)"))
        #expect(Terminal.describe(now.addingTimeInterval(3 * 86_400), now: now).hasSuffix(" (in 3 d)"))
        #expect(Terminal.describe(nil) == "-")
        #expect(Terminal.describe(.distantFuture) == "never")
        #expect(Terminal.validity(.distantFuture) == "valid with no expiry")
        #expect(Terminal.localTime(now).wholeMatch(of: /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/) != nil)
    }
}

@Suite("The token file the sink and exec write")
struct TokenFileTests {
    private func open(_ path: String) throws -> TokenFile {
        guard case .success(let directory) = FileTrust.openDirectory(of: path, as: .tokenFile) else {
            throw POSIXError(.EACCES)
        }
        return TokenFile(directory, shown: path)
    }

    @Test("written whole with its mode, replaced in one step, no temporary file left; removed on request")
    func writeReplaceRemove() throws {
        let scratch = try ScratchDirectory()
        let file = try open(scratch.path + "/token")
        try file.write(Array("first-token".utf8), mode: 0o440)
        #expect(try String(contentsOfFile: scratch.path + "/token", encoding: .utf8) == "first-token")
        #expect((try FileManager.default.attributesOfItem(atPath: scratch.path + "/token")[.posixPermissions] as? Int) == 0o440)
        let before = try FileManager.default.attributesOfItem(atPath: scratch.path + "/token")[.systemFileNumber] as? Int
        try file.write(Array("second".utf8), mode: 0o400)
        #expect(try String(contentsOfFile: scratch.path + "/token", encoding: .utf8) == "second")
        let after = try FileManager.default.attributesOfItem(atPath: scratch.path + "/token")[.systemFileNumber] as? Int
        #expect(before != after, "a new file renamed over the old one, not the old one rewritten")
        #expect(scratch.entries == ["token"])
        file.remove(because: "the test is done")
        #expect(scratch.entries.isEmpty)
    }

    @Test("a symbolic link planted at the file's name is replaced, never followed")
    func plantedLink() throws {
        let scratch = try ScratchDirectory()
        let target = scratch.path + "/elsewhere"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: target))
        let file = try open(scratch.path + "/token")
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/token", withDestinationPath: target)
        try file.write(Array("token".utf8), mode: 0o400)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "precious")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: scratch.path + "/token")) == nil)
    }

    @Test("--owner and --group: names or numbers; an unknown name is refused with a usage status")
    func ownership() throws {
        guard geteuid() == 0 else {
            #expect(throws: ToolFailure.self) { try FileOwnership(owner: "root", group: nil) }
            return
        }
        let numbers = try FileOwnership(owner: "0", group: "0")
        #expect(numbers.uid == 0 && numbers.gid == 0)
        #expect(try FileOwnership(owner: "root", group: nil).uid == 0)
        do {
            _ = try FileOwnership(owner: "no-such-user-here", group: nil)
            Issue.record("an unknown user was accepted")
        } catch let failure as ToolFailure {
            #expect(failure.status == ToolFailure.usage && failure.description.contains("no such user"))
        }
    }
}

@Suite("exec's supervisor and the sink's --on-change runner")
struct ChildProgramTests {
    @Test("a wait status as a shell reports it: the exit code, or 128 + the signal")
    func exitStatus() {
        #expect(Supervisor.exitStatus(0) == 0)
        #expect(Supervisor.exitStatus(3 << 8) == 3)
        #expect(Supervisor.exitStatus(Int32(SIGTERM)) == 128 + SIGTERM)
    }

    @Test("--signal-on-change: a signal by name, with or without SIG and in any case, or by number; nothing else")
    func signalNames() {
        #expect(Supervisor.OnChange.signalNumber("HUP") == SIGHUP)
        #expect(Supervisor.OnChange.signalNumber("sigusr2") == SIGUSR2)
        #expect(Supervisor.OnChange.signalNumber("10") == 10)
        for refused in ["0", "65", "KILLALL", "", "SIG"] { #expect(Supervisor.OnChange.signalNumber(refused) == nil, "\(refused)") }
    }

    @Test("a burst of triggers while the command runs makes one more run, not one per trigger")
    func coalesces() throws {
        let scratch = try ScratchDirectory()
        let log = scratch.path + "/runs"
        let runner = OnChangeRunner(["/bin/sh", "-c", "echo run >> \(log); sleep 0.3"], timeout: 10, label: "test")
        for _ in 0..<5 { runner.trigger() }
        runner.waitUntilIdle()
        let runs = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").count
        #expect(runs == 2, "the first run, and one for the triggers that came while it ran")
    }

    @Test("a command past its timeout is stopped (SIGTERM to its group), and the runner goes on")
    func timeout() throws {
        let scratch = try ScratchDirectory()
        let runner = OnChangeRunner(["/bin/sh", "-c", "sleep 30; touch \(scratch.path)/finished"], timeout: 0.5, label: "test")
        let start = ContinuousClock.now
        runner.trigger()
        runner.waitUntilIdle()
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(!scratch.entries.contains("finished"))
    }
}

@Suite("The QR code of a sign-in page")
struct QRCodeTests {
    @Test("its version fits the text; finder and timing patterns where ISO/IEC 18004 puts them")
    func structure() throws {
        let short = try #require(QRCode(text: "https://id.example.com/device?user_code=WDJB-MJHT"))
        #expect(short.size == short.version * 4 + 17 && short.modules.count == short.size)
        let long = try #require(QRCode(text: String(repeating: "x", count: 200)))
        #expect(long.version > short.version)
        #expect(QRCode(text: String(repeating: "x", count: 400)) == nil, "past version 10")
        let modules = short.modules
        let size = short.size
        for (x0, y0) in [(0, 0), (size - 7, 0), (0, size - 7)] {
            for y in 0..<7 {
                for x in 0..<7 {
                    let ring = max(abs(x - 3), abs(y - 3))
                    #expect(modules[y0 + y][x0 + x] == (ring != 2), "finder at (\(x0), \(y0))")
                }
            }
        }
        for index in 8..<(size - 8) {
            #expect(modules[6][index] == index.isMultiple(of: 2) && modules[index][6] == index.isMultiple(of: 2), "timing at \(index)")
        }
        let rendering = short.terminalRendering()
        #expect(rendering.split(separator: "\n").count == (size + 4 + 1) / 2)
    }
}

@Suite("The session's ID token")
struct SessionIDTokenTests {
    @Test("the claims of a compact JWS's payload (base64url, no padding); not a JWS: none")
    func claims() throws {
        let payload = Data(#"{"sub":"alice","exp":1800000000,"aud":["k8s"]}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let claims = try #require(SessionIDToken.claims(of: "eyJhbGciOiJSUzI1NiJ9.\(payload).c2ln"))
        #expect(claims["sub"] == .string("alice"))
        #expect(claims["exp"] == .number(1_800_000_000))
        #expect(SessionIDToken.claims(of: "not-a-jwt") == nil)
        #expect(SessionIDToken.claims(of: "a.%%%.c") == nil)
    }
}

@Suite("Failures as the CLI reports them")
struct ToolFailureTests {
    @Test("every reason has the exit status of its class (README: exit statuses)")
    func statuses() {
        for reason in ErrorReason.allCases {
            #expect((1...8).contains(ToolFailure.status(for: reason)), "\(reason)")
        }
        #expect(ToolFailure.status(for: .loginRequired) == 3)
        #expect(ToolFailure.status(for: .invalidCredentials) == 4)
        #expect(ToolFailure.status(for: .consentDenied) == 8 && ToolFailure.status(for: .permissionDenied) == 8)
        #expect(ToolFailure.status(for: .workloadTokenInvalid) == 6)
        #expect(ToolFailure.status(for: .networkError) == 7)
    }

    @Test("the daemon's sentence with its reason, its refused fields and when to retry, made safe to print")
    func remote() {
        var refused = AuthGateError.validationFailed([FieldError(field: "host", message: "must be a host\u{1B}[2J")])
        refused.retryAfterSeconds = 5
        let failure = ToolFailure(.remote(RPCErrorObject(refused)), json: false)
        #expect(failure.status == 5)
        let lines = failure.description.split(separator: "\n")
        #expect(lines.first?.hasSuffix(" [validation_failed]") == true, "\(failure)")
        #expect(lines.contains(#"  host: must be a host\u{1B}[2J"#), "\(failure)")
        #expect(lines.last == "  try again in 5 s")
        let unreachable = ToolFailure(.daemonUnreachable(path: "/run/x.sock", detail: "No such file or directory"), json: false)
        #expect(unreachable.status == 2 && unreachable.description.contains("/run/x.sock"))
    }

    @Test("a helper with nobody to sign in names the command, the session and why, with login_required")
    func signInSentence() {
        #expect(
            CredentialHosts.signInSentence(provider: "corp", session: "work", why: "there is no terminal to run it on")
                == "sign in first: authgate login corp --session work (the session needs a sign-in, and there is no terminal to run it on) [login_required]"
        )
    }
}

@Suite("docker's configuration: the credHelpers entry")
struct DockerConfigurationTests {
    private func document(_ path: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    }

    @Test("configure adds the entry and keeps the rest of the file and its mode; again changes nothing; unconfigure removes only it")
    func configureAndUnconfigure() throws {
        let scratch = try ScratchDirectory()
        let file = scratch.path + "/config.json"
        try Data(#"{"auths": {"ghcr.io": {}}, "credHelpers": {"gcr.io": "gcloud"}, "psFormat": "table"}"#.utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o640)
        let added = try DockerConfiguration.apply(configure: true, registry: "Registry.Example.com:5000", file: file)
        #expect(added.contains("docker asks docker-credential-authgate for registry.example.com:5000"), "\(added)")
        var written = try document(file)
        #expect(written["credHelpers"] as? [String: String] == ["gcr.io": "gcloud", "registry.example.com:5000": "authgate"])
        #expect(written["psFormat"] as? String == "table" && written["auths"] != nil)
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o640)
        #expect(try DockerConfiguration.apply(configure: true, registry: "registry.example.com:5000", file: file).contains("already"))
        _ = try DockerConfiguration.apply(configure: false, registry: "registry.example.com:5000", file: file)
        written = try document(file)
        #expect(written["credHelpers"] as? [String: String] == ["gcr.io": "gcloud"])
        #expect(try DockerConfiguration.apply(configure: false, registry: "registry.example.com:5000", file: file).contains("nothing to remove"))
        #expect(scratch.entries == ["config.json"], "no temporary file left")
    }

    @Test("a file that is not docker's JSON object, or a registry that is not a host, is refused and nothing changes")
    func refusals() throws {
        let scratch = try ScratchDirectory()
        let file = scratch.path + "/config.json"
        try Data("not json".utf8).write(to: URL(fileURLWithPath: file))
        do {
            _ = try DockerConfiguration.apply(configure: true, registry: "registry.example.com", file: file)
            Issue.record("a broken file was overwritten")
        } catch let failure as ToolFailure {
            #expect(failure.status == ToolFailure.inputRefused && failure.description.contains("nothing was changed"))
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "not json")
        #expect(throws: ToolFailure.self) { try DockerConfiguration.apply(configure: true, registry: "https://registry.example.com/v2", file: file) }
        let fresh = scratch.path + "/new/config.json"
        _ = try DockerConfiguration.apply(configure: true, registry: "registry.example.com", file: fresh)
        #expect((try FileManager.default.attributesOfItem(atPath: fresh)[.posixPermissions] as? Int) == 0o600)
        #expect((try FileManager.default.attributesOfItem(atPath: scratch.path + "/new")[.posixPermissions] as? Int) == 0o700)
    }
}

@Suite("kubectl's exec credential plugin")
struct KubernetesCredentialTests {
    @Test("the ExecCredential: kind, API version, token and its expiry in RFC 3339 UTC")
    func execCredential() throws {
        let credential = KubernetesCredential.execCredential(
            apiVersion: KubernetesCredential.apiVersions[1],
            token: "eyJ.token",
            expiresAt: Date(timeIntervalSince1970: 1_800_000_000)
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(credential.jsonBytes)) as? [String: Any])
        #expect(object["kind"] as? String == "ExecCredential" && object["apiVersion"] as? String == "client.authentication.k8s.io/v1beta1")
        #expect(object["status"] as? [String: String] == ["token": "eyJ.token", "expirationTimestamp": "2027-01-15T08:00:00Z"])
    }

    @Test("--setup: the claims, the set-credentials command with its arguments quoted, and the API server's flags from iss, azp and sub")
    func setup() {
        let claims: [String: JSONValue] = [
            "iss": .string("https://id.example.com"), "aud": .array([.string("kube"), .string("other")]), "azp": .string("kube-cli"),
            "sub": .string("alice"), "groups": .array([.string("dev")]),
        ]
        let text = KubernetesCredential.setupText(provider: "corp", session: "ops team", accessToken: false, claims: claims)
        #expect(text.contains("  groups: [\"dev\"]") && text.contains("  sub: alice"), "\(text)")
        #expect(text.contains("kubectl config set-credentials oidc-corp-ops team --exec-api-version=client.authentication.k8s.io/v1"))
        #expect(text.contains("--exec-arg=kubectl --exec-arg=corp --exec-arg=--session --exec-arg='ops team' --exec-interactive-mode=IfAvailable"))
        #expect(text.contains("--oidc-issuer-url=https://id.example.com\n") && text.contains("--oidc-client-id=kube-cli\n"))
        #expect(text.contains(#""https://id.example.com#alice""#))
        #expect(
            KubernetesCredential.setupText(provider: "corp", session: nil, accessToken: true, claims: [:]).contains("--exec-arg=--token-type --exec-arg=access")
        )
    }

    @Test("one shell word: plain text as it is, anything else single-quoted with its quotes escaped and control characters shown")
    func shellQuoted() {
        #expect(KubernetesCredential.shellQuoted("corp-1.example:443") == "corp-1.example:443")
        #expect(KubernetesCredential.shellQuoted("it's") == #"'it'\''s'"#)
        #expect(KubernetesCredential.shellQuoted("") == "''")
        #expect(KubernetesCredential.shellQuoted("a\u{1B}b") == #"'a\u{1B}b'"#)
    }

    @Test("the kubeconfig users: entry names the provider and session and asks for interactive mode when available")
    func snippet() {
        let text = KubernetesCredential.snippet(provider: "corp", session: "ops")
        #expect(text.contains("- name: corp-ops") && text.contains(#"args: ["kubectl", "corp", "--session", "ops"]"#))
        #expect(text.contains("interactiveMode: IfAvailable") && text.contains("apiVersion: client.authentication.k8s.io/v1\n"))
    }
}
