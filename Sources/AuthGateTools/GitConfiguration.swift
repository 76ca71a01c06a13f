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
    /// - Returns: The lines written, as `git` commands (stdout), or for `unconfigure` a note
    ///   saying what was removed (stderr).
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
        try git(["config", "--global", "--unset-all", helperKey, "^(authgate( .*)?|!.* git-credential( .*)?)?$"], allowing: [5], environment)
        if useHttpPath { try git(["config", "--global", "--unset-all", pathKey], allowing: [5], environment) }
        guard configure else {
            return ("", "removed git's credential lines for https://\(host)\(useHttpPath ? ", and its useHttpPath" : "").")
        }
        var lines = [["config", "--global", "--add", helperKey, ""], ["config", "--global", "--add", helperKey, helperLine()]]
        if useHttpPath { lines.append(["config", "--global", pathKey, "true"]) }
        var output = ""
        for line in lines {
            try git(line, allowing: [], environment)
            output += "git " + line.map { $0.isEmpty ? "''" : $0 }.joined(separator: " ") + "\n"
        }
        return (output, nil)
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

    /// Runs `git ARGUMENTS` with this process's stdin, stdout and stderr, and waits for it.
    /// - Parameter allowing: Exit statuses other than 0 that are not a failure.
    /// - Parameter environment: The child's environment; this process's when `nil`.
    private static func git(_ arguments: [String], allowing: Set<Int32>, _ environment: [String: String]?) throws(ToolFailure) {
        let argv: [UnsafeMutablePointer<CChar>?] = (["git"] + arguments).map { strdup($0) } + [nil]
        defer { for item in argv { free(item) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for item in envp ?? [] { free(item) } }
        var pid: pid_t = 0
        let failed = envp.map { posix_spawnp(&pid, "git", nil, nil, argv, $0) } ?? posix_spawnp(&pid, "git", nil, nil, argv, environ)
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
    }
}
