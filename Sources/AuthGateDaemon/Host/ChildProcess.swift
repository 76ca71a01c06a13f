import AuthGateCore
import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// A helper program run to completion with a hard deadline: what the daemon uses to reach the
/// Secret Service (`secret-tool`), the desktop's notifications (`notify-send`) and the user's
/// askpass program (consent).
///
/// Secrets go in on stdin and come back on stdout, never in argv (which every local user can
/// read in `/proc`). The child runs in a session of its own and is killed, with anything it
/// started, when the deadline passes: a keyring that shows a prompt nobody answers must not
/// hold up the daemon.
struct ChildProcess {
    /// What the child did.
    enum Outcome {
        /// It exited (or was killed by a signal: 128 + the signal) with what it wrote.
        case exited(status: Int32, output: [UInt8], errorText: String)
        /// It could not be started: `errno`'s text.
        case notStarted(String)
        /// It was still running at the deadline, and was killed.
        case timedOut
        /// Its owner stopped waiting (``runSuspending(input:timeout:)``'s task was cancelled), and
        /// it was killed.
        case cancelled
    }

    /// The program's path; not looked up in `PATH` (see ``find(_:in:)``).
    var path: String
    /// argv[1...].
    var arguments: [String]
    /// The child's whole environment, `NAME=value`.
    var environment: [String]

    /// stdout is kept up to this many bytes (a storage key in base64 is 44).
    static let outputLimit = 4096
    /// stderr is kept up to this many bytes, for the log.
    static let errorLimit = 2048

    /// Runs the child, writes `input` to its stdin and closes it, and waits at most `timeout`.
    /// The caller owns the output bytes and should zero them once used.
    func run(input: [UInt8], timeout: Duration, cancelDescriptor: Int32 = -1) -> Outcome {
        var output = [UInt8](repeating: 0, count: Self.outputLimit)
        var errors = [UInt8](repeating: 0, count: Self.errorLimit)
        var outputLength = 0
        var errorLength = 0
        var status: Int32 = 0
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for item in argv { free(item) }
            for item in envp { free(item) }
        }
        let result = input.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { output in
                errors.withUnsafeMutableBufferPointer { errors in
                    ag_run_child(
                        path,
                        argv,
                        envp,
                        input.baseAddress,
                        input.count,
                        output.baseAddress,
                        output.count,
                        &outputLength,
                        errors.baseAddress,
                        errors.count,
                        &errorLength,
                        milliseconds,
                        cancelDescriptor,
                        &status
                    )
                }
            }
        }
        switch result {
        case 0:
            let kept = Array(output[..<outputLength])
            for index in output.indices { output[index] = 0 }
            let text = String(decoding: errors[..<errorLength], as: UTF8.self).trimming(while: \.isWhitespace)
            return .exited(status: status, output: kept, errorText: String(text))
        case -2:
            return .timedOut
        case -3:
            return .cancelled
        default:
            return .notStarted(StorageFiles.errorText())
        }
    }

    /// ``run(input:timeout:cancelDescriptor:)`` on a thread of its own, for children that may
    /// wait long (a question to the user, a notification's action): the caller's task only
    /// suspends, and cancelling it kills the child (with anything it started) at once. Not on
    /// Dispatch's shared pool, whose threads are few: questions held open by one user's slow
    /// askpass must not keep another user's from starting, nor start their timeout late.
    func runSuspending(input: [UInt8], timeout: Duration) async -> Outcome {
        var pipe: [Int32] = [-1, -1]
        guard Glibc.pipe(&pipe) == 0 else { return .notStarted(StorageFiles.errorText()) }
        // Children are spawned with every descriptor above 2 closed (ag_run_child) anyway.
        for descriptor in pipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        let (cancelRead, cancelWrite) = (pipe[0], pipe[1])
        defer {
            close(cancelRead)
            close(cancelWrite)
        }
        let child = self
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let started = DetachedThread.start {
                    continuation.resume(returning: child.run(input: input, timeout: timeout, cancelDescriptor: cancelRead))
                }
                if !started { continuation.resume(returning: .notStarted("no thread could be started: \(StorageFiles.errorText())")) }
            }
        } onCancel: {
            var byte: UInt8 = 1
            _ = write(cancelWrite, &byte, 1)
        }
    }

    /// The first executable file called `name` in the directories of `searchPath` (a `PATH`),
    /// then in /usr/bin and /bin.
    static func find(_ name: String, in searchPath: String?) -> String? {
        let directories = (searchPath ?? "").split(separator: ":").map(String.init).filter { $0.hasPrefix("/") } + ["/usr/bin", "/bin"]
        for directory in directories {
            let candidate = directory + "/" + name
            if access(candidate, X_OK) == 0, let info = StorageFiles.pathStatus(candidate), info.isRegularFile { return candidate }
        }
        return nil
    }
}
