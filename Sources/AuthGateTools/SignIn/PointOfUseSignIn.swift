import AuthGateCore
import CLinux
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The sign-in a credential helper runs where the tool asks for a token (git, docker, kubectl),
/// when the session needs one: the provider's interactive sign-in exactly as `authgate login
/// PROVIDER` picks it, on the user's terminal (`/dev/tty`). stdout belongs to the tool, which
/// reads the helper's answer there, so nothing of the sign-in goes to it.
///
/// Two helpers starting at once share one flow: the daemon joins the second `login.begin` to
/// the pending flow of the same user, provider and session, and both wait for it.
package struct PointOfUseSignIn {
    /// The daemon the helper asked.
    package var socket: String?
    /// Who asked ("git", "docker", "kubectl"), for the first line.
    package var tool: String

    package init(socket: String?, tool: String) {
        self.socket = socket
        self.tool = tool
    }

    /// Runs the sign-in with the terminal as stdin, stdout and stderr, and puts them back.
    /// - Returns: `false` when no terminal can be opened (nothing was run).
    package func run(provider: String, session: String?) throws -> Bool {
        let terminal = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard terminal >= 0 else { return false }
        fflush(nil)
        // Close-on-exec: a browser started during the sign-in must not hold the tool's pipes
        // (git, docker and kubectl read the helper's answer to its end).
        let saved = (0...2).map { fcntl(Int32($0), F_DUPFD_CLOEXEC, 3) }
        for descriptor in 0...2 { dup2(terminal, Int32(descriptor)) }
        ag_clear_stdin_end()  // the tool's input may have ended; the terminal's has not
        defer {
            fflush(nil)
            for (descriptor, copy) in saved.enumerated() where copy >= 0 {
                dup2(copy, Int32(descriptor))
                close(copy)
            }
            close(terminal)
        }
        // The account named: under `sudo -u deploy git pull` the session filled is deploy's.
        Terminal.writeError(
            "\(tool) asks authgate for a token of \(Terminal.safe(provider)) for the local account \(Terminal.safe(Self.localAccount)), whose session needs a sign-in.\n"
        )
        try SignIn(provider: provider, session: session, daemon: DaemonConnection(socket: socket)).run()
        return true
    }

    /// The account this process runs as (the daemon keys sessions by it): its name, or its uid.
    private static var localAccount: String {
        let uid = geteuid()
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "\(String(cString: name)) (uid \(uid))"
    }
}
