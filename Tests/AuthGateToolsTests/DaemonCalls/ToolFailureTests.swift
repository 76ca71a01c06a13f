import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

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
