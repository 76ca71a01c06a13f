import AuthGateCore
import AuthGateRPC
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// `authgate git-credential configure|unconfigure HOST`: the git config lines
/// docs/INTEGRATIONS.md shows, written and removed with `git config --global` (git run as a
/// child process).
package enum GitConfiguration {
    /// The lines for `host`, as `git config` arguments, and what `unconfigure` matches to
    /// remove them: the empty helper (a reset: helpers configured for every host, such as
    /// `cache` or `libsecret`, are not asked for this one, nor told to store its token), then
    /// `authgate`.
    /// - Parameter environment: The environment git runs in (`HOME` says whose configuration).
    /// - Returns: The lines written, as `git` commands (stdout): none when they were all there
    ///   already, which the note says; for `unconfigure` a note saying what was removed, or
    ///   that there was nothing to remove (stderr).
    package static func apply(
        configure: Bool,
        host text: String,
        useHttpPath: Bool,
        environment: [String: String]? = nil
    ) throws(ToolFailure) -> (output: String, note: String?) {
        guard let host = CredentialHost.normalize(text) else {
            throw ToolFailure(
                "\(Terminal.safe(text)) is not a host: give host or host:port, without a scheme or path [invalid_params]",
                status: ToolFailure.inputRefused
            )
        }
        let helperKey = "credential.https://\(host).helper"
        let pathKey = "credential.https://\(host).useHttpPath"
        // Removes this helper's lines (an `authgate …` helper and the reset) and nothing else;
        // status 5: there were none.
        func removeHelpers() throws(ToolFailure) -> Bool {
            try git(["config", "--global", "--unset-all", helperKey, ourLines], allowing: [5], environment) == 0
        }
        guard configure else {
            var removed = try removeHelpers()
            if useHttpPath, try git(["config", "--global", "--unset-all", pathKey], allowing: [5], environment) == 0 { removed = true }
            guard removed else { return ("", "there were no git credential lines of authgate's for https://\(host); nothing was removed.") }
            return ("", "removed git's credential lines for https://\(host)\(useHttpPath ? ", and its useHttpPath" : "").")
        }
        // Already there (the reset and this helper, last, with no other line of ours before
        // them): not written again, nor printed as if they had been.
        let helpers = ["", helperLine()]
        let current = try values(helperKey, environment)
        let helpersInPlace = current.suffix(2) == ArraySlice(helpers) && !current.dropLast(2).contains(where: isOurs)
        var pathInPlace = true
        if useHttpPath { pathInPlace = try values(pathKey, environment).last == "true" }
        if helpersInPlace, pathInPlace {
            return ("", "git's credential lines for https://\(host) are already there; nothing was written.")
        }
        var lines: [[String]] = []
        if !helpersInPlace {
            _ = try removeHelpers()
            lines = helpers.map { ["config", "--global", "--add", helperKey, $0] }
        }
        if !pathInPlace { lines.append(["config", "--global", pathKey, "true"]) }
        var output = ""
        for line in lines {
            try git(line, allowing: [], environment)
            output += "git " + line.map { $0.isEmpty ? "''" : $0 }.joined(separator: " ") + "\n"
        }
        return (output, nil)
    }

    /// ``coverageWarning(host:useHttpPath:listings:)`` for the providers the daemon at `socket`
    /// lists, or that they cannot be checked (the lines are written all the same: the
    /// provider file may come later, but not silently).
    package static func coverageWarning(host: String, useHttpPath: Bool, socket: String?) -> String? {
        do throws(ToolFailure) {
            return coverageWarning(host: host, useHttpPath: useHttpPath, listings: try CredentialHosts.all(socket: socket))
        } catch {
            return "cannot check that a provider lists \(Terminal.safe(host)) for git: \(Terminal.safe("\(error)"))"
        }
    }

    /// What `configure` warns of: `host` is one no provider the caller may use lists for git
    /// (git would then get no token from authgate for it), naming the hosts they do list, or
    /// one only providers with `credential_helper.paths` list while `useHttpPath` is not asked.
    /// - Returns: `nil` when a provider serves the host.
    package static func coverageWarning(host text: String, useHttpPath: Bool, listings: [CredentialHosts.Listing]) -> String? {
        guard let host = CredentialHost.normalize(text) else { return nil }
        switch CredentialHost.select(host: host, path: nil, tool: "git", among: listings.map(\.helper)) {
        case .helper: return nil
        case .pathNeeded:
            if useHttpPath { return nil }
            return "only providers with credential_helper.paths list \(host), and git sends the path only with useHttpPath: add --use-http-path."
        case .none:
            let listed = listings.filter { $0.helper.tools.contains("git") }.flatMap { listing in
                listing.helper.hosts.map { "\(Terminal.safe($0)) (\(Terminal.safe(listing.provider)))" }
            }
            let hosts = listed.isEmpty ? "none lists any host for git" : "their credential_helper hosts for git: \(listed.joined(separator: ", "))"
            return "no provider you may use lists \(host) for git, so git will get no token from authgate for it until one does; \(hosts)."
        }
    }

    /// The helper as git will find it: `authgate` (git runs `git-credential-authgate`) when that
    /// link is on PATH, else this very program by its absolute path (`!'/path/authgate'
    /// git-credential`, which git runs through the shell), so that the line works wherever the
    /// CLI is installed, links or not.
    package static func helperLine(path: String = ProcessEnvironment.value("PATH") ?? "") -> String {
        let linked = path.split(separator: ":").contains { access("\($0)/git-credential-authgate", X_OK) == 0 }
        if linked { return "authgate" }
        guard let program = realpath("/proc/self/exe", nil) else { return "authgate" }
        defer { free(program) }
        let quoted = String(cString: program).replacing("'", with: "'\\''")
        return "!'\(quoted)' git-credential"
    }

    /// The values of this helper's lines for a host, as `git config --unset-all` matches them:
    /// the reset (empty), `authgate …`, or this program by its quoted path
    /// (`!'…' git-credential …`, as ``helperLine(path:)`` writes it) — not another tool's
    /// (`!/usr/bin/gh auth git-credential`).
    private static let ourLines = "^(authgate( .*)?|!'[^']*' git-credential( .*)?)?$"

    private static func isOurs(_ value: String) -> Bool {
        value.isEmpty || value == "authgate" || value.hasPrefix("authgate ")
            || (value.hasPrefix("!'") && value.contains("' git-credential"))
    }

    /// Every value of `key` in the global configuration, in order (none: `[]`).
    private static func values(_ key: String, _ environment: [String: String]?) throws(ToolFailure) -> [String] {
        var output = ""
        // Status 1: the key is not set.
        guard try git(["config", "--global", "--get-all", key], allowing: [1], environment, output: &output) == 0 else { return [] }
        var lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    /// Runs `git ARGUMENTS` with this process's stdin, stdout and stderr, and waits for it.
    /// - Parameter allowing: Exit statuses other than 0 that are not a failure.
    /// - Parameter environment: The child's environment; this process's when `nil`.
    /// - Returns: git's exit status (0, or one of `allowing`).
    @discardableResult
    private static func git(_ arguments: [String], allowing: Set<Int32>, _ environment: [String: String]?) throws(ToolFailure) -> Int32 {
        var ignored: String?
        return try run(arguments, allowing: allowing, environment, output: &ignored)
    }

    /// As ``git(_:allowing:_:)``, with git's stdout read into `output`.
    private static func git(
        _ arguments: [String],
        allowing: Set<Int32>,
        _ environment: [String: String]?,
        output: inout String
    ) throws(ToolFailure) -> Int32 {
        var captured: String? = ""
        let status = try run(arguments, allowing: allowing, environment, output: &captured)
        output = captured ?? ""
        return status
    }

    /// Spawns git; `output` non-nil: its stdout goes to a pipe read into it.
    private static func run(
        _ arguments: [String],
        allowing: Set<Int32>,
        _ environment: [String: String]?,
        output: inout String?
    ) throws(ToolFailure) -> Int32 {
        let argv: [UnsafeMutablePointer<CChar>?] = (["git"] + arguments).map { strdup($0) } + [nil]
        defer { for item in argv { free(item) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for item in envp ?? [] { free(item) } }
        var pid: pid_t = 0
        var pipeEnds: [Int32] = [-1, -1]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if output != nil {
            guard pipe(&pipeEnds) == 0, fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC) == 0 else {
                throw ToolFailure("cannot run git: \(String(cString: strerror(errno))) [internal_error]", status: ToolFailure.internalError)
            }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], STDOUT_FILENO)
        }
        let failed = envp.map { posix_spawnp(&pid, "git", &actions, nil, argv, $0) } ?? posix_spawnp(&pid, "git", &actions, nil, argv, environ)
        if output != nil {
            close(pipeEnds[1])
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(pipeEnds[0], &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                bytes += buffer[0..<count]
            }
            close(pipeEnds[0])
            output = String(decoding: bytes, as: UTF8.self)
        }
        guard failed == 0 else {
            throw ToolFailure(
                failed == ENOENT
                    ? "git is not installed (no git in PATH): install it, then run this again [git_not_found]"
                    : "cannot run git: \(String(cString: strerror(failed))) [internal_error]",
                status: ToolFailure.internalError
            )
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let code = Supervisor.exitStatus(status)
        guard code == 0 || allowing.contains(code) else {
            throw ToolFailure(
                "git \(arguments.prefix(3).joined(separator: " ")) … failed with status \(code) [internal_error]",
                status: ToolFailure.internalError
            )
        }
        return code
    }
}
