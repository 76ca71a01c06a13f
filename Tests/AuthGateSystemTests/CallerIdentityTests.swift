import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The executable rule of `access`: the program a caller ran is pinned when it connects.
@Suite("Callers: the executable pinned at accept", .serialized)
struct CallerIdentityTests {
    // MARK: Executable rule

    @Test(
        "a process that connects, then execs the allowed program and leaves the socket to its child, is refused",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") && FileManager.default.isExecutableFile(atPath: "/usr/bin/sleep"))
    )
    func executablePinnedAtAccept() throws {
        let daemon = try DaemonProcess(
            providers: [
                "sleepers.json":
                    #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"executables": ["/usr/bin/sleep"]}}"#
            ],
            logLevel: "info"
        )
        // The child asks once before the parent execs (so the daemon has accepted and pinned
        // the parent as python), tells the parent, waits until the parent has become
        // /usr/bin/sleep, then asks again.
        let script = """
            import os, socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile()
            asked_read, asked_write = os.pipe()
            if os.fork() == 0:
                os.close(asked_read)
                parent = os.getppid()
                s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"sleepers"}}\\n'); print(f.readline().strip(), flush=True)
                os.write(asked_write, b"x")
                deadline = time.time() + 10
                while os.readlink(f"/proc/{parent}/exe") != "/usr/bin/sleep" and time.time() < deadline:
                    time.sleep(0.01)
                s.sendall(b'{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"sleepers"}}\\n'); print(f.readline().strip(), flush=True)
                os._exit(0)
            os.close(asked_write)
            os.read(asked_read, 1)
            os.execv("/usr/bin/sleep", ["sleep", "2"])
            """
        let result = try run(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, daemon.socketPath])
        let replies = result.stdout.split(separator: "\n").map { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) ?? [:] }
        #expect(replies.count == 2, "\(result)")
        #expect(replies.allSatisfy { $0.errorReason == "permission_denied" }, "python, then the pid that became sleep after connecting: \(replies)")
        // The rule still admits the program it names: RPCServerTests' `executables` test, with the CLI.
    }
}
