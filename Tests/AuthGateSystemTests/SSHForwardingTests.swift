import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent forwarded over SSH (`ssh -R REMOTE_SOCKET:LOCAL_SOCKET`, docs/INTEGRATIONS.md): a
/// real sshd (Debian's openssh-server) on a loopback port with its own configuration and host
/// key, a second local user as the remote account, and the built CLI on the "remote" side.
@Suite("The agent over SSH", .serialized)
struct SSHForwardingTests {
    static let sshd = "/usr/sbin/sshd", ssh = "/usr/bin/ssh", keygen = "/usr/bin/ssh-keygen"
    static let canRun =
        getuid() == 0
        && [sshd, ssh, keygen, python, "/usr/sbin/useradd", "/usr/bin/setpriv"]
            .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    /// The remote account: a user with a shell (sshd runs the command through it), no password
    /// (`*`, not `!`: sshd without PAM refuses a locked account even for a key) and no home
    /// directory. Created when missing and then kept, so a run creates it at most once; it can
    /// sign in nowhere but in this test's sshd, which alone has its key.
    static let remoteUser = "authgate-ssh"

    static let python = "/usr/bin/python3"
    /// Runs its arguments as a child and stays its parent, exiting with its status: sshd and ssh
    /// close every descriptor they inherit, among them the one by which Foundation's Process
    /// learns that its child ended — Process then waits for that child blocking, and every other
    /// child of the test process waits with it. The child gets an empty signal mask (Process
    /// passes on the blocked mask of its thread) and is killed when the supervisor gets
    /// SIGTERM. It prints `child-pid=N` on stderr first.
    static let supervisor = """
        import signal, subprocess, sys
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        child = subprocess.Popen(sys.argv[1:])
        print(f"child-pid={child.pid}", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: child.kill())
        sys.exit(child.wait())
        """

    @Test(
        "ssh -R: a second user's remote authgate prints the local session's token through AUTHGATE_SOCKET; the daemon sees the local ssh client (its uid, its pid, /usr/bin/ssh for executables); root there can use the socket, other users cannot; after the connection ends it refuses; a reconnect replaces the stale socket",
        .enabled(if: canRun, "needs root, sshd, ssh, ssh-keygen, python3, useradd and setpriv")
    )
    func remoteForward() throws {
        // Another test process may hold the lock of /etc/passwd for a moment (useradd, userdel).
        try eventually {
            try run(URL(fileURLWithPath: "/usr/bin/id"), [Self.remoteUser]).status == 0
                || run(
                    URL(fileURLWithPath: "/usr/sbin/useradd"),
                    ["-M", "-N", "-g", "nogroup", "-d", "/nonexistent", "-s", "/bin/sh", "-p", "*", Self.remoteUser]
                ).status == 0
        }

        let daemon = try DaemonProcess(
            providers: [
                "mock.json": Providers.mock,
                // Through the forward the caller is the local ssh client: this rule admits it ...
                "viassh.json":
                    #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"executables": ["/usr/bin/ssh"]}}"#,
                // ... and this one, naming the program the remote user runs, does not.
                "notssh.json": #"{"type": "mock", "access": {"executables": ["\#(BuiltProducts.cli.path)"]}}"#,
            ],
            logLevel: "debug"
        )
        try daemon.signIn()
        let token = try daemon.cli(["token", "mock"]).stdout.trimmingCharacters(in: .newlines)
        #expect(token.hasPrefix("mock_at_"))

        let scratch = daemon.scratch.path
        chmod(scratch, 0o755)  // the remote user reaches its directory and the built CLI
        let remoteDirectory = scratch + "/remote"
        let remoteSocket = remoteDirectory + "/agent.sock"
        try FileManager.default.createDirectory(atPath: remoteDirectory, withIntermediateDirectories: false)
        // Searchable by everyone, so that the socket's own mode is what keeps other users out.
        chmod(remoteDirectory, 0o755)
        #expect(try run(URL(fileURLWithPath: "/usr/bin/chown"), [Self.remoteUser, remoteDirectory]).status == 0)
        let server = try SSHServer(directory: scratch + "/sshd", user: Self.remoteUser)

        // One connection: the remote side runs authgate through the forwarded socket, reports,
        // and holds the connection open until its stdin closes.
        let cli = BuiltProducts.cli.path
        let script = """
            export AUTHGATE_SOCKET='\(remoteSocket)'
            '\(cli)' token mock; echo "token-exit=$?"
            '\(cli)' token notssh 2>&1; echo "notssh-exit=$?"
            printf 'demo-password-1\\n' | '\(cli)' login viassh --username demo --password-stdin >/dev/null 2>&1; echo "viassh-login-exit=$?"
            echo connected
            read _ || true  # until ssh's stdin closes
            """
        let connection = try server.connect(forwarding: remoteSocket, to: daemon.socketPath, command: script)
        try eventually(timeout: .seconds(30)) { connection.output.text.contains("connected\n") || !connection.isRunning }
        let lines = connection.output.text.split(separator: "\n").map(String.init)
        #expect(lines.first == token, "the remote authgate printed the local session's token")
        #expect(lines.contains("token-exit=0") && lines.contains("viassh-login-exit=0"), "\(lines.filter { !$0.contains(token) }) \(connection.errors.text)")
        #expect(
            lines.contains { $0.contains("[permission_denied]") } && lines.contains("notssh-exit=8"),
            "the remote program is not what the daemon sees"
        )
        // The peer is the local ssh client: its uid (sessions are this user's) and its pid.
        let sshPID = try #require(connection.pid)
        #expect(daemon.logText.contains("peer.pid=\(sshPID) peer.uid=\(getuid())"), "the daemon sees the local ssh client as the peer")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(sshPID)/exe") == SSHForwardingTests.ssh)
        let locally = try daemon.cli(["token", "viassh"])
        #expect(locally.status == 8 && locally.stderr.contains("permission_denied"), "the session signed in through ssh is for ssh only: \(locally.stderr)")

        // The forwarded socket belongs to the remote user, mode 0600 (sshd's StreamLocalBindMask):
        // root there can use it, other users cannot.
        let attributes = try FileManager.default.attributesOfItem(atPath: remoteSocket)
        #expect(attributes[.posixPermissions] as? Int == 0o600 && attributes[.ownerAccountName] as? String == Self.remoteUser, "\(attributes)")
        let asRoot = try run(BuiltProducts.cli, ["token", "mock"], environment: ["AUTHGATE_SOCKET": remoteSocket])
        #expect(asRoot.stdout.trimmingCharacters(in: .newlines) == token, "root on the remote host can use the forwarded sessions")
        let asNobody = try run(
            BuiltProducts.cli,
            ["token", "mock"],
            environment: ["AUTHGATE_SOCKET": remoteSocket],
            prefix: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        )
        #expect(asNobody.status == 2 && !asNobody.stdout.contains(token), "\(asNobody.stderr)")

        // The connection ends: the socket answers nothing (the file stays; nothing listens).
        try connection.finish()
        #expect(connection.status == 0, "\(connection.errors.text)")
        try eventually { (try? RPCConnection(path: remoteSocket)) == nil }
        #expect(FileManager.default.fileExists(atPath: remoteSocket), "sshd leaves the socket file behind")
        let after = try run(BuiltProducts.cli, ["token", "mock"], environment: ["AUTHGATE_SOCKET": remoteSocket])
        #expect(after.status == 2 && after.stdout.isEmpty, "\(after.stderr)")
        #expect(after.stderr.contains("the ssh connection that forwarded this socket has ended"), "\(after.stderr)")

        // The next connection binds the same path again (StreamLocalBindUnlink in sshd's
        // configuration; without it the forward of the stale path fails).
        let again = try server.connect(
            forwarding: remoteSocket,
            to: daemon.socketPath,
            command: "AUTHGATE_SOCKET='\(remoteSocket)' '\(cli)' token mock"
        )
        try again.finish()
        #expect(again.status == 0 && again.output.text.trimmingCharacters(in: .newlines) == token, "\(again.errors.text)")

        for log in [daemon.logText, server.log.text, connection.errors.text, again.errors.text] {
            #expect(!log.contains(token) && !log.contains("demo-password-1"))
        }
    }
}

/// A real sshd on a loopback port in the foreground (`-D -e`), with its own configuration,
/// host key and authorized key in `directory`; nothing of the system's configuration is read.
/// It runs under ``SSHForwardingTests/supervisor``, as ssh does.
private final class SSHServer {
    let directory: String
    let user: String
    let port: Int
    let log = SharedText()
    private let process = Process()

    init(directory: String, user: String) throws {
        self.directory = directory
        self.user = user
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        chmod(directory, 0o755)
        for key in ["host_key", "client_key"] {
            let made = try run(URL(fileURLWithPath: SSHForwardingTests.keygen), ["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", directory + "/" + key])
            guard made.status == 0 else { throw TestFailure("ssh-keygen: \(made.stderr)") }
        }
        try FileManager.default.copyItem(atPath: directory + "/client_key.pub", toPath: directory + "/authorized_keys")
        chmod(directory + "/authorized_keys", 0o644)
        // sshd's privilege separation directory, which Debian's service creates when it starts.
        if !FileManager.default.fileExists(atPath: "/run/sshd") {
            try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        port = try MetricsTests.freePort()
        try Data(
            """
            ListenAddress 127.0.0.1:\(port)
            HostKey \(directory)/host_key
            PidFile none
            UsePAM no
            StrictModes no
            AuthenticationMethods publickey
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            AuthorizedKeysFile \(directory)/authorized_keys
            AllowUsers \(user)
            PermitTTY no
            X11Forwarding no
            AllowAgentForwarding no
            # Remote forwarding of Unix sockets. AllowTcpForwarding must not be no or local:
            # OpenSSH 9.2 then refuses remote socket forwards too.
            AllowStreamLocalForwarding remote
            AllowTcpForwarding remote
            StreamLocalBindUnlink yes
            LogLevel VERBOSE

            """.utf8
        ).write(to: URL(fileURLWithPath: directory + "/sshd_config"))
        try Data("[127.0.0.1]:\(port) \(String(contentsOfFile: directory + "/host_key.pub", encoding: .utf8))".utf8)
            .write(to: URL(fileURLWithPath: directory + "/known_hosts"))
        process.executableURL = URL(fileURLWithPath: SSHForwardingTests.python)
        process.arguments = ["-c", SSHForwardingTests.supervisor, SSHForwardingTests.sshd, "-D", "-e", "-f", directory + "/sshd_config"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = errors
        collect(errors.fileHandleForReading, into: log)
        try process.run()
        try eventually(timeout: .seconds(10)) { log.text.contains("Server listening on 127.0.0.1 port \(port)") || !process.isRunning }
        guard process.isRunning else { throw TestFailure("sshd did not start:\n\(log.text)") }
    }

    /// `ssh -R remote:local user@127.0.0.1 command`, with this server's key pinned and no
    /// configuration of the tester's read; it runs until ``SSHConnection/finish()``.
    func connect(forwarding remote: String, to local: String, command: String) throws -> SSHConnection {
        try SSHConnection([
            "-F", "/dev/null", "-p", "\(port)", "-i", directory + "/client_key", "-o", "IdentitiesOnly=yes",
            "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=\(directory)/known_hosts", "-o", "StrictHostKeyChecking=yes",
            "-o", "ExitOnForwardFailure=yes", "-o", "LogLevel=ERROR",
            "-R", "\(remote):\(local)", "\(user)@127.0.0.1", command,
        ])
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// A running `ssh`: its output as it comes, its stdin held open until ``finish()``.
private final class SSHConnection {
    let output = SharedText(), errors = SharedText()
    private let process = Process()
    private let input = Pipe()
    /// How many of the two pipes reached their end.
    private let ended = SharedCount()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: SSHForwardingTests.python)
        process.arguments = ["-c", SSHForwardingTests.supervisor, SSHForwardingTests.ssh] + arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        for (pipe, text) in [(out, output), (err, errors)] {
            pipe.fileHandleForReading.readabilityHandler = { [ended] handle in
                let data = handle.availableData
                if data.isEmpty {
                    handle.readabilityHandler = nil
                    ended.add()
                } else {
                    text.append(data)
                }
            }
        }
        try process.run()
    }

    /// The ssh process's pid (not its supervisor's).
    var pid: Int32? {
        errors.text.split(separator: "\n").first { $0.hasPrefix("child-pid=") }.flatMap { Int32($0.dropFirst("child-pid=".count)) }
    }

    var isRunning: Bool { process.isRunning }
    var status: Int32 { process.terminationStatus }

    /// Closes ssh's stdin (the remote command's) and waits until ssh has exited and all its
    /// output has been read.
    func finish() throws {
        try? input.fileHandleForWriting.close()
        try eventually(timeout: .seconds(30)) { !process.isRunning && ended.value == 2 }
    }

    deinit {
        if process.isRunning {
            if let pid { kill(pid, SIGKILL) }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// A number counted up from one thread and read from another.
private final class SharedCount: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}
