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

/// What the CLI hands on: streamed JSON into a pipe, and tokens that never reach an argv.
@Suite("The CLI: streamed JSON, tokens never in argv", .serialized)
struct CLIOutputTests {
    // MARK: Streamed --json

    @Test("login --device --json into a pipe delivers the begin line while the sign-in is still open")
    func jsonStreamsToPipe() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "authorization_pending")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProviderFile(server, grants: #"["device_code"]"#)])
        try daemon.waitForLog("provider ready")
        let process = Process()
        process.executableURL = BuiltProducts.cli
        process.arguments = ["login", "faulty", "--device", "--json"]
        process.environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": "/usr/bin:/bin"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            // SIGKILL: the test runner's blocked signals are the child's too.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { break }
            line.append(byte)
        }
        let begin = try JSONSerialization.jsonObject(with: line) as? [String: Any]
        #expect(begin?["user_code"] as? String != nil, "\(String(decoding: line, as: UTF8.self))")
        #expect(process.isRunning, "the sign-in is still open")
    }
    // MARK: No token in argv

    @Test("authgate exec: the token in the named variable, never in argv, no wrapper process left, the command's exit status")
    func execPassesTheToken() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let token = try daemon.cli(["token", "mock", "--min-valid", "60"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let dir = daemon.scratch.path
        let process = Process()
        process.executableURL = BuiltProducts.cli
        process.arguments = [
            "exec", "mock", "--env", "MY_TOKEN", "--", "/bin/sh", "-c",
            #"printf %s "$MY_TOKEN" > "$0/token"; tr '\0' ' ' < /proc/$$/cmdline > "$0/argv"; echo $$ > "$0/pid"; exit 7"#, dir,
        ]
        process.environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": "/usr/bin:/bin"]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 7, "the command's own status")
        #expect((try? String(contentsOfFile: dir + "/token", encoding: .utf8)) == token)
        let argv = (try? String(contentsOfFile: dir + "/argv", encoding: .utf8)) ?? ""
        #expect(argv.contains("/bin/sh") && !argv.contains(token), "\(argv)")
        #expect(
            (try? String(contentsOfFile: dir + "/pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
                == String(process.processIdentifier),
            "authgate became the command: no wrapper process"
        )
        let missing = try daemon.cli(["exec", "mock", "--", "/nonexistent/program"])
        #expect(missing.status == 127 && missing.stderr.contains("cannot run /nonexistent/program"), "\(missing)")
        let signedOut = try daemon.cli(["exec", "nope", "--", "/bin/true"])
        #expect(signedOut.status == 6 && signedOut.stderr.contains("[unknown_provider]"), "\(signedOut)")
    }

    @Test("`token --header` feeds `curl -H @-`: the provider's userinfo answers, and no argv held the token")
    func headerForCurl() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProviderFile(server)])
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let header = try daemon.cli(["token", "faulty", "--header"])
        #expect(header.status == 0 && header.stdout.hasPrefix("Authorization: Bearer faulty-at-") && header.stdout.hasSuffix("\n"), "\(header)")
        let curl = try run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-sS", "--cacert", server.caFile, "-H", "@-", server.issuer + "/userinfo"],
            stdin: header.stdout
        )
        #expect(curl.stdout.contains(#""sub": "faulty-user""#) || curl.stdout.contains(#""sub":"faulty-user""#), "\(curl)")
    }
}
