import AuthGateCore
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// What the stand-in starter saw when the notification's Sign in action reached it.
private final class RecordingStarter: InteractiveSignInStarter {
    let notifier: Mutex<SignInNotifier?> = Mutex(nil)
    /// For each start: whether its task was cancelled once the session it signs in to was
    /// restored (as the flow's loopback listener restores it while the page's opener finishes).
    let cancelledAfterRestore: Mutex<[Bool]> = Mutex([])

    func canStart(_ key: SessionKey) async -> Bool { true }

    func start(_ key: SessionKey) async {
        notifier.withLock { $0 }?.sessionRestored(key)
        cancelledAfterRestore.withLock { $0.append(Task.isCancelled) }
    }
}

/// SignInNotifier in process, with a stand-in `notify-send` (a shell script): which tasks a
/// restored session stops.
@Suite("Sign-in notifications (SignInNotifier)")
struct SignInNotifierTests {
    private let key = SessionKey(uid: UInt32(geteuid()), provider: ProviderID("corp")!, name: .default)

    /// A notifier whose `notify-send` is `script` (its argument list appended to `calls`).
    private func notifier(_ scratch: ScratchDirectory, script: String) throws -> SignInNotifier {
        try scratch.write("notify-send", "#!/bin/sh\necho \"$*\" >> \(scratch.path)/calls\n\(script)\n")
        chmod(scratch.path + "/notify-send", 0o755)
        return SignInNotifier(
            program: scratch.path + "/notify-send",
            desktop: DesktopSession(childEnvironment: ["PATH": "/usr/bin:/bin"]),
            logger: Logger(label: "test")
        )
    }

    /// Each call's arguments (the body's second line, the command, starts a line of its own).
    private func calls(_ scratch: ScratchDirectory) -> [String] {
        let text = (try? String(contentsOfFile: scratch.path + "/calls", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("--app-name=") }.map(String.init)
    }

    @Test("a picked Sign in action is not stopped when the session it signs in to is restored; the next ending is told again")
    func pickedActionOutlivesTheRestore() async throws {
        let scratch = try ScratchDirectory()
        let notifier = try notifier(scratch, script: "echo signin")
        let starter = RecordingStarter()
        starter.notifier.withLock { $0 = notifier }
        notifier.setStarter(starter)

        notifier.sessionNeedsSignIn(key, because: "The refresh token is invalid or expired.", offerSignIn: true)
        try await until { starter.cancelledAfterRestore.withLock { $0.count } == 1 }
        #expect(starter.cancelledAfterRestore.withLock { $0 } == [false], "the sign-in was stopped by the session it restored")
        #expect(calls(scratch).first?.contains("--action=signin=Sign in") == true, "\(calls(scratch))")

        notifier.sessionNeedsSignIn(key, because: "The refresh token is invalid or expired.", offerSignIn: true)
        try await until { starter.cancelledAfterRestore.withLock { $0.count } == 2 }
        #expect(calls(scratch).count == 2)
        await notifier.shutdown()
    }

    @Test("a notification still waiting for its action is withdrawn (its notify-send stopped) when the session has tokens again")
    func waitingNotificationWithdrawn() async throws {
        let scratch = try ScratchDirectory()
        let notifier = try notifier(scratch, script: "echo $$ > \(scratch.path)/pid\nexec sleep 60")
        notifier.setStarter(RecordingStarter())
        notifier.sessionNeedsSignIn(key, because: "The refresh token is invalid or expired.", offerSignIn: true)
        var pid: pid_t = 0
        try await until {
            pid = pid_t((try? String(contentsOfFile: scratch.path + "/pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
            return pid > 0
        }
        #expect(kill(pid, 0) == 0)
        notifier.sessionRestored(key)
        try await until { kill(pid, 0) != 0 }
        // Not told twice while it waited; told again once it has ended anew.
        notifier.sessionNeedsSignIn(key, because: "The refresh token is invalid or expired.", offerSignIn: true)
        try await until { calls(scratch).count == 2 }
        await notifier.shutdown()
    }
}
