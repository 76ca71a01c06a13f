package import AuthGateClient
import AuthGateCore
package import AuthGateRPC

#if canImport(Glibc)
package import Glibc
#endif

/// What `authgate sink` does with each event of the session it follows (``TokenFollower``): a
/// token is written to the file in its format, then `--on-change` runs; an ending or a refusal
/// removes the file and says why, so that a service fails loudly instead of sending a dead
/// token. The CLI checks the options, opens the file's directory and follows; this decides and
/// writes (tested in process with events of its own).
package final class TokenSink {
    private let file: TokenFile
    private let shown: String
    private let format: TokenFileFormat
    private let mode: mode_t
    private let onChange: OnChangeRunner?
    private let report: (String) -> Void
    /// Whether the last token given was written (what `--once` exits by).
    package private(set) var written = false

    /// - Parameters:
    ///   - shown: The file's path as the user gave it, for messages.
    ///   - report: Where a line for the user goes (the CLI's standard error), without a newline.
    package init(
        file: TokenFile,
        shown: String,
        format: TokenFileFormat,
        mode: mode_t,
        onChange: OnChangeRunner? = nil,
        report: @escaping (String) -> Void
    ) {
        self.file = file
        self.shown = shown
        self.format = format
        self.mode = mode
        self.onChange = onChange
        self.report = report
    }

    /// Handles one event; returns whether to follow on (with `once`, not after a token).
    package func handle(_ event: TokenFollower.Event, once: Bool) -> Bool {
        switch event {
        case .token(let token):
            written = write(token)
            if written { onChange?.trigger() }
            return !once && stopped == nil
        case .ended(let ended):
            file.remove(because: "the session ended (\(ended.reason.rawValue))", mode: mode)
            report("the session ended (\(ended.reason.rawValue)): \(Terminal.safe(ended.message)) Waiting for a new sign-in.")
            return true
        case .unavailable(let reason, let message):
            file.remove(because: "\(Terminal.safe(message)) [\(reason.rawValue)]", mode: mode)
            return true
        }
    }

    /// Why the sink stopped: its file's name was taken by another user's file, or its directory
    /// was removed (a service manager starts it again, on the path as it is then).
    /// With its exit status: not allowed (8) for a name taken, failed (1) for a directory gone.
    package private(set) var stopped: (reason: String, status: Int32)?

    private func write(_ token: TokenResult) -> Bool {
        do {
            try file.write(try format.render(token), mode: mode)
        } catch let failure as TokenFile.Failure where failure.kind != .failed {
            stopped = (failure.description, failure.kind == .taken ? ToolFailure.notAllowed : ToolFailure.internalError)
            return false
        } catch {
            report("cannot write \(Terminal.safe(shown)): \(error)")
            return false
        }
        report("wrote \(Terminal.safe(shown)) (the token is \(Terminal.validity(token.expiresAt))).")
        return true
    }

    /// `--format template`: the template at `path`, read as the daemon reads a file it trusts
    /// (root's or the caller's, in directories nobody else may change, no link another user
    /// owns, a regular file of at most 1 MiB) — a root sink copies it into a file it gives the
    /// service, so a service user could otherwise have it copy any root-only file to them —
    /// and parsed (known placeholders only, `{{token}}` among them).
    package static func template(at path: String) throws(ToolFailure) -> TokenFileFormat {
        let text: String
        switch FileTrust.read(path, as: .template, maximumSize: 1 << 20, followsLink: false) {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(let problem):
            throw ToolFailure("the sink does not use the template: \(Terminal.safe(problem.description)).", status: ToolFailure.usage)
        }
        do throws(TokenTemplate.Problem) {
            return .template(try TokenTemplate(parsing: text))
        } catch {
            throw ToolFailure("the template \(Terminal.safe(path)) cannot be used: \(Terminal.safe(error.description)).", status: ToolFailure.usage)
        }
    }
}

extension TokenSink {
    /// What `authgate sink` was asked for, its options checked.
    package struct Options {
        /// The file, as the user gave it.
        package var file: String
        package var format: TokenFileFormat
        package var mode: mode_t
        package var owner: String?
        package var group: String?
        /// `--mkdir`: make the missing directories.
        package var makesDirectories: Bool
        /// `--on-change`: a command run after each write, and its timeout in seconds.
        package var onChange: [String]
        package var onChangeTimeout: Double
        /// `--once`: write the current token, then exit.
        package var once: Bool

        package init(
            file: String,
            format: TokenFileFormat,
            mode: mode_t,
            owner: String?,
            group: String?,
            makesDirectories: Bool,
            onChange: [String],
            onChangeTimeout: Double,
            once: Bool
        ) {
            self.file = file
            self.format = format
            self.mode = mode
            self.owner = owner
            self.group = group
            self.makesDirectories = makesDirectories
            self.onChange = onChange
            self.onChangeTimeout = onChangeTimeout
            self.once = once
        }
    }

    /// `authgate sink`: opens the file's directory (making it with `--mkdir`), then follows the
    /// session (``TokenFollower``) and hands each event to a sink, until the follower ends (or
    /// after the first token, `--once`). Lines for the user go to standard error.
    package static func run(_ options: Options, params: TokenParams, daemon: DaemonConnection) throws {
        @Sendable func say(_ line: String) { Terminal.writeError("authgate sink: \(line)\n") }
        let ownership = try FileOwnership(owner: options.owner, group: options.group)
        // --mkdir makes the missing directories during the walk, each in a directory already
        // checked, and never by path (FileTrust.openDirectory).
        let creating = options.makesDirectories ? DirectoryCreation(mode: ownership.gid == nil ? 0o700 : 0o750, group: ownership.gid) : nil
        let tokenFile: TokenFile
        switch FileTrust.openDirectory(of: options.file, as: .tokenFile, creating: creating) {
        case .success(let directory):
            for made in directory.created { say("created the directory \(Terminal.safe(made)).") }
            tokenFile = TokenFile(directory, shown: options.file, ownership: ownership)
        case .failure(let problem):
            throw ToolFailure("the sink writes no file: \(Terminal.safe(problem.description)).", status: ToolFailure.usage)
        }
        do {
            try tokenFile.claim(mode: options.mode)
        } catch {
            throw ToolFailure("the sink writes no file: \(Terminal.safe("\(error)")).", status: ToolFailure.notAllowed)
        }
        let runner = options.onChange.isEmpty ? nil : OnChangeRunner(options.onChange, timeout: options.onChangeTimeout, label: "authgate sink")
        let follower = TokenFollower(socketPath: daemon.socketPath, params: params, notice: { say(Terminal.safe($0)) })
        let sink = TokenSink(file: tokenFile, shown: options.file, format: options.format, mode: options.mode, onChange: runner, report: say)
        do throws(RPCClientError) {
            try follower.run(once: options.once) { sink.handle($0, once: options.once) }
        } catch {
            throw ToolFailure(error, json: false)
        }
        runner?.waitUntilIdle()
        if let stopped = sink.stopped {
            throw ToolFailure("the sink stopped: \(Terminal.safe(stopped.reason)).", status: stopped.status)
        }
        if options.once && !sink.written {
            throw ToolFailure("the sink did not write \(Terminal.safe(options.file)).", status: ToolFailure.internalError)
        }
    }
}
