import ArgumentParser
import AuthGateClient
import AuthGateCore
import AuthGateRPC
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `authgate sink`: keeps a file holding a session's current token, for services that read a
/// file (nginx, a proxy, a daemon that re-reads its credentials on SIGHUP).
///
/// It subscribes with `token.watch` and rewrites the file atomically on every change (a temp
/// file in the same directory, fsync, rename, fsync of the directory), so a reader never sees a
/// partial or empty file while the session lives. When the session ends (signed out, refused)
/// the file is **removed**: a service then fails loudly instead of sending a dead token. It
/// reconnects with backoff (1 s doubling to 30 s) when the daemon restarts, and waits for a
/// new sign-in when there is no session.
///
/// The sink may be root's, so the file's directory is opened once, at start, by
/// `FileTrust.openDirectory` (no directory others could change entries of, no symbolic link
/// another user owns), and every write and the removal are made relative to that descriptor:
/// a link swapped in later cannot lead it into another directory.
struct Sink: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep a file holding a session's current token, rewritten on every change (runs until stopped).",
        discussion: """
            Run it as the service's user, e.g. from a systemd unit (systemd/authgate-sink@.service). The file is \
            replaced atomically on each refresh or sign-in, and removed when the session ends. Exits non-zero \
            with a sentence when the provider is unknown or refused to you; waits for the daemon and for a \
            sign-in otherwise. Refuses (exit 64) a directory on the file's path that another user owns or may \
            change, a symbolic link another user owns, and a --mode others may write.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        /// The bare token and a newline.
        case raw
        /// `Authorization: Bearer TOKEN` and a newline.
        case header
        /// The `token` result as one line of JSON.
        case json
    }

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(help: ArgumentHelp("The file to keep the token in.", valueName: "path"))
    var file: String

    @Option(help: "What the file holds: raw (the token), header (Authorization: Bearer TOKEN) or json (the token result).")
    var format: Format = .raw

    @Option(help: ArgumentHelp("The file's mode, in octal: no group or other write bit (other-readable draws a warning).", valueName: "octal"))
    var mode = "0400"

    @Flag(help: "Write the file once and exit.")
    var once = false

    @Option(name: .customLong("on-change"), parsing: .remaining,
            help: ArgumentHelp("A command run after each write (the rest of the line), e.g. systemctl reload nginx. It gets no token.", valueName: "command"))
    var onChange: [String] = []

    /// `--mode`, checked by ``validate()``.
    private var fileMode: mode_t { mode_t(UInt16(mode, radix: 8) ?? 0o400) }

    func validate() throws {
        guard let value = UInt16(mode, radix: 8), value <= 0o777 else { throw ValidationError("--mode must be an octal mode such as 0400 or 0640.") }
        // Whoever may write the file may hand the service a token of their choosing.
        guard value & 0o022 == 0 else {
            throw ValidationError("--mode \(mode) lets \(value & 0o002 != 0 ? "every user" : "the file's group") change the token file; use a mode such as 0400, 0440 or 0600.")
        }
        guard !file.isEmpty else { throw ValidationError("--file must name a file.") }
    }

    func run() throws {
        if fileMode & 0o004 != 0 {
            Terminal.writeError("authgate sink: warning: --mode \(mode) lets every local user read the token; give the service's group 0440 instead.\n")
        }
        let tokenFile: TokenFile
        switch FileTrust.openDirectory(of: file, as: .tokenFile) {
        case .success(let directory): tokenFile = TokenFile(directory, shown: file)
        case .failure(let problem):
            throw CLIError(message: "the sink writes no file: \(Terminal.safe(problem.description)).", exitCode: .validationFailure)
        }
        let socket = global.socket ?? SocketLocation.forClient()
        let params = TokenParams(provider: selection.provider, session: selection.session)
        var delay = 1.0
        var saidWaiting = false
        while true {
            do throws(RPCClientError) {
                let connection = try RPCConnection(path: socket)
                try watch(connection, params: params, into: tokenFile) {
                    delay = 1  // the daemon answered: the next reconnect starts from a second again
                }
                // The daemon closed the connection (a restart): reconnect.
                Terminal.writeError("authgate sink: authgated closed the connection; reconnecting.\n")
            } catch .remote(let error) where [.loginRequired, .serviceUnavailable, .networkError, .rateLimited].contains(error.reason) {
                if once { throw CLIError(.remote(error), json: false) }
                if !saidWaiting {
                    Terminal.writeError("authgate sink: \(Terminal.safe(error.description)) [\(error.reason.rawValue)]; waiting.\n")
                    saidWaiting = true
                }
                tokenFile.remove()
            } catch .daemonUnreachable(let path, let detail) {
                if once { throw CLIError(.daemonUnreachable(path: path, detail: detail), json: false) }
                if !saidWaiting {
                    Terminal.writeError("authgate sink: cannot reach authgated at \(path) (\(detail)); retrying.\n")
                    saidWaiting = true
                }
            } catch {
                // Unknown provider, refused, bad arguments: waiting would not help.
                throw CLIError(error, json: false)
            }
            if once { return }
            usleep(useconds_t(delay * 1_000_000))
            delay = min(delay * 2, 30)
        }
    }

    /// One watch on one connection (the client library's): the first answer, then each
    /// notification, until the daemon closes the connection (or, with `--once`, after the
    /// first write).
    private func watch(_ connection: RPCConnection, params: TokenParams, into tokenFile: TokenFile,
                       answered: () -> Void) throws(RPCClientError) {
        var first = true
        try AuthGateClient.watchBlocking(on: connection, params) { event in
            if first { answered() }
            first = false
            switch event {
            case .token(let token):
                write(token, to: tokenFile)
                return !once
            case .ended(let ended):
                tokenFile.remove()
                Terminal.writeError("authgate sink: the session ended (\(ended.reason.rawValue)): \(Terminal.safe(ended.message)) Waiting for a new sign-in.\n")
                return true
            }
        }
    }

    /// Writes the file in the chosen format and runs `--on-change`.
    private func write(_ token: TokenResult, to tokenFile: TokenFile) {
        let contents: [UInt8] = switch format {
        case .raw: Array((token.accessToken.exposedValue + "\n").utf8)
        case .header: Array("Authorization: \(token.tokenType) \(token.accessToken.exposedValue)\n".utf8)
        // The same members every time: a token result without the ID token.
        case .json: Self.json(TokenResult(accessToken: token.accessToken, tokenType: token.tokenType, expiresAt: token.expiresAt,
                                          scopes: token.scopes, idToken: nil))
        }
        do {
            try tokenFile.write(contents, mode: fileMode)
        } catch {
            Terminal.writeError("authgate sink: cannot write \(Terminal.safe(file)): \(error)\n")
            return
        }
        Terminal.writeError("authgate sink: wrote \(Terminal.safe(file)) (the token is valid until \(Terminal.describe(token.expiresAt))).\n")
        if !onChange.isEmpty { Self.run(onChange) }
    }

    private static func json(_ token: TokenResult) -> [UInt8] {
        ((try? RPCCoding.makeEncoder().encode(token)).map(Array.init) ?? []) + [UInt8(ascii: "\n")]
    }

    /// Runs `command` and waits for it; its failure is reported, not fatal.
    private static func run(_ command: [String]) {
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawnp(&pid, command[0], nil, nil, arguments, environ) == 0 else {
            return Terminal.writeError("authgate sink: cannot run \(command[0]).\n")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        if status != 0 { Terminal.writeError("authgate sink: \(command[0]) failed (wait status \(status)).\n") }
    }
}

/// The sink's file in the directory it opened at start: replaced in one step (a temp file in
/// the directory, written, fsynced, renamed over the file, and the directory fsynced, so that a
/// reader sees the old file or the new one, whole, and a crash leaves one of the two) and
/// removed, every call relative to the directory's descriptor, never by path.
final class TokenFile {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let directory: TrustedDirectory
    /// The path as the user gave it, for messages.
    private let shown: String

    init(_ directory: TrustedDirectory, shown: String) {
        self.directory = directory
        self.shown = shown
    }

    deinit {
        close(directory.descriptor)
    }

    func write(_ bytes: [UInt8], mode: mode_t) throws {
        let (descriptor, temporary) = try createTemporary()
        var renamed = false
        defer {
            if !renamed { unlinkat(directory.descriptor, temporary, 0) }
        }
        guard fchmod(descriptor, mode) == 0 else {
            close(descriptor)
            throw Failure(description: String(cString: strerror(errno)))
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                close(descriptor)
                throw Failure(description: String(cString: strerror(errno)))
            }
            offset += written
        }
        guard fsync(descriptor) == 0, close(descriptor) == 0 else { throw Failure(description: String(cString: strerror(errno))) }
        guard renameat(directory.descriptor, temporary, directory.descriptor, directory.name) == 0 else {
            throw Failure(description: String(cString: strerror(errno)))
        }
        renamed = true
        if directory.canSync { fsync(directory.descriptor) }
    }

    /// Removes the file, and says so.
    func remove() {
        if unlinkat(directory.descriptor, directory.name, 0) == 0 {
            Terminal.writeError("authgate sink: removed \(Terminal.safe(shown)).\n")
        }
    }

    /// A new file `.NAME.XXXXXX` in the directory, created exclusively (`mkstemp` takes no
    /// directory descriptor), mode 0600 until the `fchmod`.
    private func createTemporary() throws -> (Int32, String) {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100 {
            let name = ".\(directory.name)." + String((0..<6).map { _ in letters.randomElement(using: &generator)! })
            let descriptor = openat(directory.descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if descriptor >= 0 { return (descriptor, name) }
            guard errno == EEXIST else { break }
        }
        throw Failure(description: String(cString: strerror(errno)))
    }
}
