import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

/// Where the CLI looks for the daemon (`SocketLocation.forClient`), and the process's
/// variables as it reads them (`ProcessEnvironment`, `getenv` one at a time).
@Suite("Socket location")
struct SocketLocationTests {
    @Test("AUTHGATE_SOCKET, else the user's socket when it exists (runtime directory, else state directory), else the system's")
    func forClient() throws {
        let scratch = try ScratchDirectory()
        let runtime = scratch.path + "/run"
        let home = scratch.path + "/home"
        #expect(SocketLocation.forClient(environment: ["AUTHGATE_SOCKET": "/x/s.sock", "XDG_RUNTIME_DIR": runtime]) == "/x/s.sock")
        #expect(SocketLocation.forClient(environment: ["AUTHGATE_SOCKET": "", "XDG_RUNTIME_DIR": runtime]) == SocketLocation.systemSocket)
        try FileManager.default.createDirectory(atPath: runtime + "/authgate", withIntermediateDirectories: true)
        try scratch.write("run/authgate/authgate.sock", "")
        #expect(SocketLocation.forClient(environment: ["XDG_RUNTIME_DIR": runtime, "HOME": home]) == runtime + "/authgate/authgate.sock")
        // No runtime directory: the socket in the state directory, XDG_STATE_HOME's or HOME's.
        #expect(SocketLocation.forClient(environment: ["HOME": home]) == SocketLocation.systemSocket)
        try FileManager.default.createDirectory(atPath: home + "/.local/state/authgate", withIntermediateDirectories: true)
        try scratch.write("home/.local/state/authgate/authgate.sock", "")
        #expect(SocketLocation.forClient(environment: ["HOME": home]) == home + "/.local/state/authgate/authgate.sock")
        #expect(SocketLocation.forClient(environment: ["HOME": home, "XDG_STATE_HOME": scratch.path + "/state"]) == SocketLocation.systemSocket)
        #expect(SocketLocation.forClient(environment: ["HOME": home, "XDG_STATE_HOME": "relative"]) == home + "/.local/state/authgate/authgate.sock")
    }

    /// Read only: setting a variable here would race with the other tests' threads, which read
    /// the environment whenever they start a process.
    @Test("a variable of this process: its value as the environment holds it, nil when unset")
    func processEnvironment() {
        for name in ["PATH", "HOME", "AUTHGATE_BIN_DIR"] {
            #expect(ProcessEnvironment.value(name) == ProcessInfo.processInfo.environment[name], "\(name)")
        }
        #expect(ProcessEnvironment.value("AUTHGATE_NO_SUCH_VARIABLE_\(getpid())") == nil)
    }
}
