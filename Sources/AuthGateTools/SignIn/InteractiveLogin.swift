import AuthGateClient
package import AuthGateCore
package import AuthGateRPC
import CLinux
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Set by the Ctrl-C handler before it cancels the flow, so that the main thread (whose
/// `login.complete` then fails) leaves the exit to the handler.
private let interrupted = Atomic<Bool>(false)

/// A device-code or browser sign-in, run from the terminal: `login.begin`, the instructions
/// (URL, code, QR code, browser), then `login.complete` with a spinner. Ctrl-C sends
/// `login.cancel` on a second connection and exits with status 130.
package struct InteractiveLogin {
    package var daemon: DaemonConnection
    package var provider: String
    package var grant: Grant
    package var session: String?
    package var scopes: [String]
    /// The OpenID Connect `prompt` (`create`: the provider's sign-up page).
    package var prompt: String?
    package var openBrowser: Bool
    package var showQRCode: Bool
    /// How the final line starts: "Signed in to" or "Registered and signed in to".
    package var verb: String
    /// `login --confirm` / `--no-confirm`.
    package var confirm: Bool?

    package init(
        daemon: DaemonConnection,
        provider: String,
        grant: Grant,
        session: String?,
        scopes: [String] = [],
        prompt: String? = nil,
        openBrowser: Bool,
        showQRCode: Bool,
        verb: String = "Signed in to",
        confirm: Bool? = nil
    ) {
        self.daemon = daemon
        self.provider = provider
        self.grant = grant
        self.session = session
        self.scopes = scopes
        self.prompt = prompt
        self.openBrowser = openBrowser
        self.showQRCode = showQRCode
        self.verb = verb
        self.confirm = confirm
    }

    /// Signs in and prints the outcome (``SignIn/report(_:daemon:verb:)``).
    package func run() throws {
        try SignIn.report(try signIn(beginAsJSON: daemon.json), daemon: daemon, verb: verb)
    }

    /// The sign-in without its last line: its result.
    /// - Parameter beginAsJSON: `login.begin`'s result goes to stdout as JSON, not as
    ///   instructions on stderr.
    package func signIn(beginAsJSON: Bool) throws -> LoginResult {
        let params = LoginBeginParams(
            provider: provider,
            grant: grant,
            session: session,
            scopes: scopes.isEmpty ? nil : scopes,
            prompt: prompt,
            confirm: confirm
        )
        let begin = try daemon.call(.loginBegin, params, as: LoginBeginResult.self, progress: "Starting the sign-in to \(provider)…")
        // Ctrl-C cancels the flow from here on, before the instructions promise it.
        let stopCancelling = Self.cancelOnInterrupt(flowID: begin.flowID, daemon: daemon, provider: provider)
        defer { stopCancelling() }
        if beginAsJSON {
            try DaemonConnection.printJSON(begin)
        } else {
            let instructions = SignInInstructions(provider: provider, openingBrowser: openBrowser, drawsQRCode: showQRCode && Terminal.stderrIsTerminal)
            Terminal.writeError(instructions.text(begin))
        }
        if begin.grant == .authorizationCode, openBrowser, let url = begin.authorizationURL {
            Self.openInBrowser(url)
        }
        let waiting = begin.grant == .deviceCode ? "Waiting for you to enter the code…" : "Waiting for you to sign in in the browser…"
        do {
            return try daemon.call(.loginComplete, LoginCompleteParams(flowID: begin.flowID), as: LoginResult.self, progress: waiting)
        } catch {
            // Ctrl-C: the handler cancelled the flow (which failed this call) and exits by itself.
            if interrupted.load(ordering: .acquiring) { while true { pause() } }
            throw error
        }
    }

    /// Runs `xdg-open URL` in the background, its output to /dev/null and no other descriptor
    /// of ours (a helper's pipes to git, which reads to their end, would stay open for as long
    /// as the browser runs); silent when it is missing or fails. (posix_spawn rather than
    /// Foundation's Process: the CLI does without Foundation, for its start-up time.)
    /// - Parameter opener: The program (a test's stand-in).
    static func openInBrowser(_ url: String, opener: String = "xdg-open") {
        _ = ag_spawn_opener(opener, url, environ)
    }

    /// Ctrl-C while waiting: cancel the flow at the daemon, say so, exit 130.
    /// - Returns: What ends that, giving SIGINT back its earlier disposition (`provider test`
    ///   and the helpers go on after the sign-in, and Ctrl-C must stop them as usual).
    private static func cancelOnInterrupt(flowID: String, daemon: DaemonConnection, provider: String) -> () -> Void {
        let earlier = signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: DispatchQueue.global())
        source.setEventHandler {
            guard !interrupted.exchange(true, ordering: .acquiringAndReleasing) else { return }
            let cancelled = (try? daemon.client.callBlocking(.loginCancel, LoginCancelParams(flowID: flowID), as: LoginCancelResult.self))?.cancelled
            let message =
                cancelled == true
                ? "\r\u{1B}[K\nSign-in to \(provider) cancelled.\n"
                : "\r\u{1B}[K\nInterrupted; the sign-in to \(provider) may have ended already.\n"
            Terminal.writeError(message)
            exit(130)
        }
        source.resume()
        return {
            source.cancel()
            signal(SIGINT, earlier)
        }
    }
}
