package import AuthGateClient
import AuthGateCore
package import AuthGateRPC
import CLinux
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `authgate exec --restart-on-change` / `--signal-on-change`: runs the command as a child and
/// stays with it.
///
/// The main thread waits (`poll`) on a signalfd and on a pipe from the thread that follows the
/// token (``TokenFollower``). SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the child
/// (but for a terminal's, which reached it already; it is in exec's process group) and the
/// child gets SIGTERM when exec ends, even by SIGKILL; the
/// child's end ends the supervisor with its status (128+N for signal N, as shells report it).
/// A new token restarts the child (SIGTERM, wait, start with the new token) or is written to
/// the token file before the child gets its signal. Restarts are serialised: tokens that come
/// while the child is stopping make one restart, with the newest token.
package final class Supervisor {
    package enum OnChange {
        case restart
        case signal(Int32)

        /// A signal's number from its name (`HUP`, `SIGHUP`, case-insensitive) or its number
        /// (1–64): `--signal-on-change`'s value; `nil` for anything else.
        package static func signalNumber(_ text: String) -> Int32? {
            if let number = Int32(text), (1..<65).contains(number) { return number }
            var name = text.uppercased()
            if name.hasPrefix("SIG") { name.removeFirst(3) }
            let names: [String: Int32] = [
                "HUP": SIGHUP, "INT": SIGINT, "QUIT": SIGQUIT, "TERM": SIGTERM, "USR1": SIGUSR1,
                "USR2": SIGUSR2, "ALRM": SIGALRM, "WINCH": SIGWINCH, "CONT": SIGCONT,
            ]
            return names[name]
        }
    }

    /// What the following thread hands the main thread.
    private struct Inbox {
        var token: TokenResult?
        var failure: String?
    }

    private final class Mailbox: Sendable {
        let contents = Mutex(Inbox())
    }

    private let command: [String]
    private let variable: String
    private let tokenFile: TokenFile?
    private let signals: Int32
    private let onChange: OnChange
    private let inbox = Mailbox()

    package init(command: [String], variable: String, tokenFile: TokenFile?, signals: Int32, onChange: OnChange) {
        self.command = command
        self.variable = variable
        self.tokenFile = tokenFile
        self.signals = signals
        self.onChange = onChange
    }

    /// `authgate exec --restart-on-change` or `--signal-on-change`: the session's token now and
    /// the token file's directory opened, then ``run(first:follower:)`` with a follower of the
    /// session (whose notices go to standard error).
    /// - Parameter tokenFile: The file the token is kept in, as the user named it.
    package static func supervise(
        command: [String],
        variable: String,
        tokenFile: String?,
        signals: Int32,
        onChange: OnChange,
        params: TokenParams,
        daemon: DaemonConnection
    ) throws -> Int32 {
        let first = try daemon.call(.token, params, as: TokenResult.self)
        var file: TokenFile?
        if let tokenFile {
            switch FileTrust.openDirectory(of: tokenFile, as: .tokenFile) {
            case .success(let directory): file = TokenFile(directory, shown: tokenFile)
            case .failure(let problem):
                throw ToolFailure("the supervisor writes no token file: \(Terminal.safe(problem.description)).", status: ToolFailure.usage)
            }
        }
        let follower = TokenFollower(socketPath: daemon.socketPath, params: params) { Terminal.writeError("authgate exec: \(Terminal.safe($0))\n") }
        return try Supervisor(command: command, variable: variable, tokenFile: file, signals: signals, onChange: onChange).run(first: first, follower: follower)
    }

    /// Runs the command until it ends (not for a restart); returns the exit status to pass on.
    package func run(first: TokenResult, follower: TokenFollower) throws -> Int32 {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0,
            pipeEnds.allSatisfy({ fcntl($0, F_SETFD, FD_CLOEXEC) == 0 && fcntl($0, F_SETFL, O_NONBLOCK) == 0 })
        else {
            throw ToolFailure("cannot make a pipe: \(String(cString: strerror(errno))).", status: ToolFailure.internalError)
        }
        var current = first
        try writeFile(current)
        var child = try spawn(with: current)
        let wake = pipeEnds[1]
        let inbox = self.inbox
        DispatchQueue.global().async {
            do {
                try follower.run(once: false) { event in
                    switch event {
                    case .token(let token):
                        inbox.contents.withLock { $0.token = token }
                        _ = write(wake, "t", 1)
                    case .ended(let ended):
                        Terminal.writeError("authgate exec: the session ended (\(ended.reason.rawValue)); the command keeps its token until a new sign-in.\n")
                    case .unavailable:
                        break
                    }
                    return true
                }
            } catch {
                inbox.contents.withLock { $0.failure = "\(error)" }
                _ = write(wake, "f", 1)
            }
        }
        var stopping = false  // a restart's SIGTERM was sent; the child's end starts it again
        var stopAsked = false  // SIGTERM, SIGINT or SIGQUIT came: the child's end is exec's
        var descriptors = [pollfd(fd: signals, events: Int16(POLLIN), revents: 0), pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&descriptors, 2, -1) >= 0 || errno == EINTR else {
                throw ToolFailure("cannot wait for the command: \(String(cString: strerror(errno))).", status: ToolFailure.internalError)
            }
            if descriptors[0].revents != 0 {
                var sentByKernel: Int32 = 0
                let signal = ag_read_signal(signals, &sentByKernel)
                if signal == SIGCHLD {
                    var status: Int32 = 0
                    let reaped = waitpid(child, &status, WNOHANG)
                    if reaped == child {
                        // A stop that came during a restart ends it: the command is not started again.
                        guard stopping, !stopAsked else { return Self.exitStatus(status) }
                        stopping = false
                        child = try spawn(with: current)
                    }
                } else if signal > 0 {
                    if [SIGTERM, SIGINT, SIGQUIT].contains(signal) { stopAsked = true }
                    // A terminal's Ctrl-C or Ctrl-\ went to the whole foreground process group, the
                    // command in it too: passed on, it would come twice. A hang-up is the kernel's
                    // too, but reaches only the session leader when exec is one (ssh -t): passed on.
                    let reachedTheCommand = sentByKernel != 0 && getpgid(child) == getpgrp() && (signal != SIGHUP || getsid(0) != getpid())
                    if !reachedTheCommand { kill(child, signal) }
                }
            }
            if descriptors[1].revents != 0 {
                var byte: UInt8 = 0
                while read(pipeEnds[0], &byte, 1) == 1 {}
                let (token, failure) = inbox.contents.withLock { inbox in
                    defer { inbox = Inbox() }
                    return (inbox.token, inbox.failure)
                }
                if let failure {
                    Terminal.writeError("authgate exec: no longer follows the token: \(Terminal.safe(failure)); the command keeps running.\n")
                }
                if let token, token.accessToken.exposedValue != current.accessToken.exposedValue {
                    if (try? writeFile(token)) == nil, case .signal = onChange {
                        // writeFile said why: signalled, the command would reread the old token.
                        // `current` stays the file's, so the next new token is written (and
                        // signalled) even if it is the one that could not be written now.
                        Terminal.writeError("authgate exec: the command was not signalled: its token file still holds the previous token.\n")
                        continue
                    }
                    current = token
                    switch onChange {
                    case .restart:
                        Terminal.writeError("authgate exec: a new token (\(Terminal.validity(token.expiresAt))); restarting the command.\n")
                        if !stopping {
                            stopping = true
                            kill(child, SIGTERM)
                        }
                    case .signal(let signal):
                        Terminal.writeError(
                            "authgate exec: a new token (\(Terminal.validity(token.expiresAt))); sent the command signal \(signal).\n"
                        )
                        kill(child, signal)
                    }
                }
            }
        }
    }

    /// The token file, when there is one, holds `token`.
    private func writeFile(_ token: TokenResult) throws {
        guard let tokenFile else { return }
        do {
            try tokenFile.write(try TokenFileFormat.raw.render(token), mode: 0o400)
        } catch {
            Terminal.writeError("authgate exec: cannot write the token file: \(error)\n")
            throw ToolFailure("the token file was not written.", status: ToolFailure.internalError)
        }
    }

    /// Starts the command with `token` in its environment.
    private func spawn(with token: TokenResult) throws -> pid_t {
        let prefix = variable + "="
        var environment: [String] = []
        var entry: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if !text.hasPrefix(prefix) { environment.append(text) }
            entry += 1
        }
        environment.append(prefix + token.accessToken.exposedValue)
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        let variables: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            for item in arguments { free(item) }
            for item in variables { free(item) }
        }
        var pid: pid_t = 0
        // SIGTERM when this process ends, even by SIGKILL: no command left running on its own.
        let failed = ag_spawn_supervised_child(&pid, command[0], arguments, variables, SIGTERM)
        guard failed == 0 else {
            throw ToolFailure("cannot run \(Terminal.safe(command[0])): \(String(cString: strerror(failed)))", status: failed == ENOENT ? 127 : 126)
        }
        return pid
    }

    /// A wait status as a shell reports it: the exit code, or 128+N for signal N.
    package static func exitStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}

extension Supervisor {
    /// `authgate exec`'s flags as typed: ``problem`` is what makes them unusable (the
    /// command's usage error), ``onChange`` whether a supervisor stays, and what it does.
    package struct Flags {
        package var command: [String]
        /// `--env`: the variable that holds the token.
        package var variable: String
        package var restartOnChange: Bool
        /// `--signal-on-change`: a signal's name or number.
        package var signalOnChange: String?
        package var tokenFile: String?

        package init(
            command: [String],
            variable: String = "AUTHGATE_TOKEN",
            restartOnChange: Bool = false,
            signalOnChange: String? = nil,
            tokenFile: String? = nil
        ) {
            self.command = command
            self.variable = variable
            self.restartOnChange = restartOnChange
            self.signalOnChange = signalOnChange
            self.tokenFile = tokenFile
        }

        /// The sentence of the first flag that cannot be used: no command, an `--env` that is
        /// no variable name, both ways of a change or a signal that is none, `--token-file`
        /// without a supervisor, `--signal-on-change` without `--token-file` (a running command
        /// cannot be handed a new environment).
        package var problem: String? {
            guard !command.isEmpty else { return "Name the command after --, e.g. authgate exec corp -- kubectl get pods." }
            if let problem = TokenSink.envProblem(variable) { return problem }
            guard !(restartOnChange && signalOnChange != nil) else {
                return "--restart-on-change and --signal-on-change exclude each other: restart the command or signal it."
            }
            if let signalOnChange, OnChange.signalNumber(signalOnChange) == nil {
                return "--signal-on-change \(signalOnChange) is not a signal: use a name such as HUP, USR1 or USR2, or a number."
            }
            guard tokenFile == nil || restartOnChange || signalOnChange != nil else {
                return "--token-file goes with --restart-on-change or --signal-on-change."
            }
            guard signalOnChange == nil || tokenFile != nil else {
                return "--signal-on-change needs --token-file: a running command cannot be handed a new environment."
            }
            return nil
        }

        /// What a supervisor does on a new token; `nil` when none stays (the command replaces
        /// the CLI).
        package var onChange: OnChange? {
            if restartOnChange { return .restart }
            return signalOnChange.map { .signal(OnChange.signalNumber($0) ?? SIGHUP) }
        }
    }
}
