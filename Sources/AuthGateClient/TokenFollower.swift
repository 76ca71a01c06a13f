public import AuthGateCore
public import AuthGateRPC
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A `token.watch` that reconnects: the session's token, then each new one, for as long as the
/// caller wants, across daemon restarts and sign-ins. `authgate sink` and `authgate exec
/// --restart-on-change` run it; Swift programs get it as ``AuthGateClient/follow(provider:session:minimumValidity:)``
/// (the Python client's `watch` does the same).
///
/// It waits instead of failing when waiting can help, and tells ``notice`` why once per cause
/// (not once per retry):
/// - no session (`login_required`): it watches again with `wait_for_sign_in`, so the daemon
///   answers the moment a sign-in gives the session a token (no polling, no backoff);
/// - the daemon unreachable, or answering `service_unavailable` / `network_error` /
///   `rate_limited`: it retries after 1 s, doubling to 30 s;
/// - the daemon closed the connection (a restart): it reconnects.
///
/// Every other refusal (unknown provider, not allowed, bad arguments) is thrown: waiting would
/// not help.
public struct TokenFollower: Sendable {
    public enum Event: Sendable {
        /// The session's token: at once, then each new one.
        case token(TokenResult)
        /// The session ended (signed out, refused); the follower goes on.
        case ended(SessionEnded)
        /// The daemon refused the token for now (`reason`, and the daemon's sentence); the
        /// follower waits.
        case unavailable(reason: ErrorReason, message: String)
    }

    public var socketPath: String
    public var params: TokenParams
    /// Told, as a sentence, why the follower waits: once per cause.
    public var notice: @Sendable (String) -> Void

    public init(socketPath: String, params: TokenParams, notice: @escaping @Sendable (String) -> Void = { _ in }) {
        self.socketPath = socketPath
        self.params = params
        self.notice = notice
    }

    /// Runs until `handle` returns false or `stop` is stopped (from any thread). With `once`,
    /// nothing is waited for: the first refusal or failure to reach the daemon is thrown.
    public func run(once: Bool = false, stop: FollowStop? = nil, _ handle: (Event) -> Bool) throws(RPCClientError) {
        var delay = 1.0
        var waitForSignIn = false
        var lastCause: String?
        func say(_ cause: String, _ sentence: String) {
            guard cause != lastCause else { return }
            lastCause = cause
            notice(sentence)
        }
        while stop?.isStopped != true {
            var params = params
            params.waitForSignIn = waitForSignIn && !once ? true : nil
            do throws(RPCClientError) {
                let connection = try RPCConnection(path: socketPath)
                if let stop, !stop.attach(connection.interrupter) { return }
                defer { stop?.detach() }
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
                    stopped = !goOn || stop?.isStopped == true
                    return !stopped
                }
                if stopped || stop?.isStopped == true { return }
                // The daemon closed the connection (a restart): reconnect.
                say("closed", "authgated closed the connection (stopped or restarting); reconnecting.")
            } catch .remote(let error) where error.reason == .loginRequired && !once {
                guard handle(.unavailable(reason: .loginRequired, message: error.description)) else { return }
                say("login_required", "\(error.description) [login_required]; waiting for a sign-in.")
                if !waitForSignIn {
                    // Watch again, asking the daemon to answer when the session appears.
                    waitForSignIn = true
                    continue
                }
                // Asked to wait, the daemon answered at once (one older than this client): retry.
            } catch .remote(let error) where [.serviceUnavailable, .networkError, .rateLimited].contains(error.reason) && !once {
                let reason = error.reason
                guard handle(.unavailable(reason: reason, message: error.description)) else { return }
                say(reason.rawValue, "\(error.description) [\(reason.rawValue)]; retrying.")
            } catch .daemonUnreachable(let path, let detail) where !once {
                say("unreachable", "cannot reach authgated at \(path) (\(detail)); retrying.")
            }
            if let stop {
                if stop.sleep(seconds: delay) { return }
            } else {
                usleep(useconds_t(delay * 1_000_000))
            }
            delay = min(delay * 2, 30)
        }
    }
}

/// Stops a watch or a follower from another thread: interrupts its blocked read (only while its
/// connection is open: a descriptor number is reused once closed) and its wait between tries.
public final class FollowStop: Sendable {
    private struct State {
        var interrupter: RPCConnection.Interrupter?
        var stopped = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    public init() {}

    public var isStopped: Bool { state.withLock { $0.stopped } }

    /// False when stopped already: the watch should not start.
    func attach(_ interrupter: RPCConnection.Interrupter) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return false }
            state.interrupter = interrupter
            return true
        }
    }

    func detach() {
        state.withLock { $0.interrupter = nil }
    }

    /// Waits `seconds` unless stopped meanwhile; true when stopped.
    func sleep(seconds: Double) -> Bool {
        if isStopped { return true }
        _ = wake.wait(timeout: .now() + seconds)
        return isStopped
    }

    public func stop() {
        state.withLock { state in
            state.stopped = true
            state.interrupter?.interrupt()
        }
        wake.signal()
    }
}
