import CLinux
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `authgate sink --on-change`: runs a command after a write without holding up the next one.
///
/// One run at a time: a write while the command still runs asks for one more run after it (a
/// burst of writes makes one). The command runs in a process group of its own; past `timeout`
/// the group gets SIGTERM, and SIGKILL ``killGrace`` later. A failure, a timeout or a command
/// that cannot start is logged; the sink goes on.
package final class OnChangeRunner: Sendable {
    /// Between SIGTERM and SIGKILL.
    package static let killGrace = 5.0

    private struct State {
        var running = false
        var pending = false
    }

    private let command: [String]
    private let timeout: Double
    private let label: String
    private let state = Mutex(State())
    private let idle = DispatchGroup()

    /// - Parameter label: The command that runs it, for messages (`authgate sink`).
    package init(_ command: [String], timeout: Double, label: String) {
        self.command = command
        self.timeout = timeout
        self.label = label
    }

    /// A write happened: runs the command now, or after the one running.
    package func trigger() {
        let start = state.withLock { state -> Bool in
            if state.running {
                state.pending = true
                return false
            }
            state.running = true
            return true
        }
        if start {
            idle.enter()
            DispatchQueue.global().async { self.runLoop() }
        }
    }

    /// Waits until no run is going on or asked for (`--once`).
    package func waitUntilIdle() {
        idle.wait()
    }

    private func runLoop() {
        while true {
            runOnce()
            let again = state.withLock { state -> Bool in
                guard state.pending else {
                    state.running = false
                    return false
                }
                state.pending = false
                return true
            }
            if !again { break }
        }
        idle.leave()
    }

    private func runOnce() {
        let name = Terminal.safe(command[0])
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for item in arguments { free(item) } }
        var pid: pid_t = 0
        // A group of its own: a timeout stops the command and whatever it started.
        let spawned = ag_spawn_child(&pid, command[0], arguments, environ, 1)
        guard spawned == 0 else {
            return Terminal.writeError("\(label): cannot run --on-change \(name): \(String(cString: strerror(spawned))).\n")
        }
        // Signals go to the group only while the command has not been reaped: the exit is
        // noted under the lock before the zombie is collected, so its pid cannot be reused yet.
        let exited = ExitFlag()
        let group = pid
        let deadline = DispatchTime.now() + timeout
        DispatchQueue.global().asyncAfter(deadline: deadline) { [label, timeout] in
            let sent = exited.value.withLock { exited -> Bool in
                guard !exited else { return false }
                kill(-group, SIGTERM)
                return true
            }
            guard sent else { return }
            Terminal.writeError("\(label): --on-change \(name) still ran after \(Self.seconds(timeout)) s; sent it SIGTERM.\n")
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.killGrace) {
                let killed = exited.value.withLock { exited -> Bool in
                    guard !exited else { return false }
                    kill(-group, SIGKILL)
                    return true
                }
                if killed { Terminal.writeError("\(label): --on-change \(name) ignored SIGTERM; sent it SIGKILL.\n") }
            }
        }
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0, errno == EINTR {}
        exited.value.withLock { $0 = true }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let signal = status & 0x7F
        let code = (status >> 8) & 0xFF
        if signal != 0 {
            Terminal.writeError("\(label): --on-change \(name) was killed by signal \(signal).\n")
        } else if code != 0 {
            Terminal.writeError("\(label): --on-change \(name) failed (exit status \(code)).\n")
        }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// Whether an `--on-change` run has exited (not yet reaped), shared with its timers.
private final class ExitFlag: Sendable {
    let value = Mutex(false)
}
