import AuthGateClient
import AuthGateCore
import AuthGateRPC

#if canImport(Glibc)
import Glibc
#endif

/// The reconnecting `token.watch` that `authgate sink` and `authgate exec --restart-on-change`
/// / `--signal-on-change` run: the session's token, then each new one, for as long as the
/// handler wants.
///
/// It waits instead of failing when waiting can help, and says why on stderr once per cause
/// (not once per retry):
/// - no session (`login_required`): it watches again with `wait_for_sign_in`, so the daemon
///   answers the moment a sign-in gives the session a token (no polling, no backoff);
/// - the daemon unreachable, or answering `service_unavailable` / `network_error` /
///   `rate_limited`: it retries after 1 s, doubling to 30 s;
/// - the daemon closed the connection (a restart): it reconnects.
///
/// Every other refusal (unknown provider, not allowed, bad arguments) is thrown as a
/// ``CLIError``: waiting would not help.
struct TokenFollower {
    enum Event {
        /// The session's token: at once, then each new one.
        case token(TokenResult)
        /// The session ended (signed out, refused); the watch goes on.
        case ended(SessionEnded)
        /// The daemon refused the token for now (`reason` says why); the follower waits.
        case unavailable(reason: String)
    }

    /// The command, for messages (`authgate sink`).
    let command: String
    let socket: String
    let params: TokenParams

    /// Runs until `handle` returns false. With `once`, nothing is waited for: the first
    /// refusal or failure to reach the daemon is thrown.
    func run(once: Bool, _ handle: (Event) -> Bool) throws {
        var delay = 1.0
        var waitForSignIn = false
        var lastCause: String?
        func say(_ cause: String, _ sentence: String) {
            guard cause != lastCause else { return }
            lastCause = cause
            Terminal.writeError("\(command): \(sentence)\n")
        }
        while true {
            var params = params
            params.waitForSignIn = waitForSignIn && !once ? true : nil
            do throws(RPCClientError) {
                let connection = try RPCConnection(path: socket)
                var stopped = false
                try AuthGateClient.watchBlocking(on: connection, params) { event in
                    // The daemon answered: the next wait starts afresh.
                    delay = 1
                    waitForSignIn = false
                    lastCause = nil
                    let goOn =
                        switch event {
                        case .token(let token): handle(.token(token))
                        case .ended(let ended): handle(.ended(ended))
                        }
                    stopped = !goOn
                    return goOn
                }
                if stopped { return }
                // The daemon closed the connection (a restart): reconnect.
                say("closed", "authgated closed the connection (stopped or restarting); reconnecting.")
            } catch .remote(let error) where error.reason == .loginRequired && !once {
                let reason = "\(Terminal.safe(error.description)) [\(error.reason.rawValue)]"
                _ = handle(.unavailable(reason: reason))
                say("login_required", "\(reason); waiting for a sign-in.")
                if !waitForSignIn {
                    // Watch again, asking the daemon to answer when the session appears.
                    waitForSignIn = true
                    continue
                }
                // Asked to wait, the daemon answered at once (one older than this client): retry.
            } catch .remote(let error) where [.serviceUnavailable, .networkError, .rateLimited].contains(error.reason) && !once {
                let reason = "\(Terminal.safe(error.description)) [\(error.reason.rawValue)]"
                _ = handle(.unavailable(reason: reason))
                say(error.reason.rawValue, "\(reason); retrying.")
            } catch .daemonUnreachable(let path, let detail) where !once {
                say("unreachable", "cannot reach authgated at \(Terminal.safe(path)) (\(Terminal.safe(detail))); retrying.")
            } catch {
                throw CLIError(error, json: false)
            }
            usleep(useconds_t(delay * 1_000_000))
            delay = min(delay * 2, 30)
        }
    }
}
