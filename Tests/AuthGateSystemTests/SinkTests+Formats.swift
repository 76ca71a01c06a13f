import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The sink's file formats (nginx, env, template), owner and group, --once and --on-change.
extension SinkTests {
    @Test("the formats in process: nginx, env, template (each placeholder, spaces, lines), and what they refuse")
    func formatsInProcess() throws {
        let expiry = Date(timeIntervalSince1970: 1_795_000_000)
        let token = TokenResult(accessToken: Secret("eyJ.a-b_c~d+e/f=="), tokenType: "Bearer", expiresAt: expiry, scopes: ["openid"], idToken: nil)
        let text = { (bytes: [UInt8]) in String(decoding: bytes, as: UTF8.self) }
        #expect(text(try TokenFileFormat.nginx.render(token)) == "proxy_set_header Authorization \"Bearer eyJ.a-b_c~d+e/f==\";\n")
        #expect(text(try TokenFileFormat.env(name: "API_TOKEN").render(token)) == "API_TOKEN='eyJ.a-b_c~d+e/f=='\n")
        var dpop = token
        dpop.tokenType = "DPoP"
        #expect(text(try TokenFileFormat.nginx.render(dpop)) == "proxy_set_header Authorization \"DPoP eyJ.a-b_c~d+e/f==\";\n")
        // A token that would end nginx's string or expand in a shell is not written unquoted.
        for bad in [#"ab"c"#, "ab$c", "a b", "a=b", "ab\nc", ""] {
            var odd = token
            odd.accessToken = Secret(bad)
            #expect(throws: TokenFileFormat.Refusal.self) { try TokenFileFormat.nginx.render(odd) }
            #expect(throws: TokenFileFormat.Refusal.self) { try TokenFileFormat.env(name: "T").render(odd) }
            #expect(text(try TokenFileFormat.raw.render(odd)) == bad + "\n")
        }
        // A shell expands `~` at the start of an unquoted value (b64token has no `:`, after which it would too).
        let envFile = FileManager.default.temporaryDirectory.appendingPathComponent("authgate-env-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: envFile) }
        var tilde = token
        tilde.accessToken = Secret("~root/x")
        try Data(try TokenFileFormat.env(name: "T").render(tilde)).write(to: URL(fileURLWithPath: envFile))
        let shell = try run(URL(fileURLWithPath: "/usr/bin/env"), ["-i", "HOME=/home/h", "/bin/sh", "-c", #"set -a; . "$0"; printf %s "$T""#, envFile])
        #expect(shell.status == 0 && shell.stdout == "~root/x", "\(shell)")
        #expect(
            TokenFileFormat.isVariableName("API_TOKEN_2") && !TokenFileFormat.isVariableName("2X") && !TokenFileFormat.isVariableName("A-B")
                && !TokenFileFormat.isVariableName("")
        )

        let template = try TokenTemplate(parsing: "Authorization: {{token_type}} {{ token }}\nuntil {{expires_at}} ({{expires_in}} s) {}}{ {{token}}\n")
        #expect(template.placeholders == [.tokenType, .token, .expiresAt, .expiresIn, .token])
        #expect(
            template.render(token, now: expiry.addingTimeInterval(-99.5))
                == "Authorization: Bearer eyJ.a-b_c~d+e/f==\nuntil 2026-11-18T11:06:40Z (99 s) {}}{ eyJ.a-b_c~d+e/f==\n"
        )
        #expect(template.render(token, now: expiry.addingTimeInterval(5)).contains("(0 s)"), "never negative")
        for (bad, sentence) in [
            ("a\nb {{secret}}", "line 2: unknown placeholder {{secret}}; a template knows {{token}}, {{token_type}}, {{expires_at}}, {{expires_in}} only"),
            ("{{token}} {{ }}", "line 1: unknown placeholder {{}}"),
            ("x\n\n{{token", "line 3: a {{ is not closed by }}"),
            ("{{exec ls}}", "unknown placeholder {{exec ls}}"),
            ("root:x:0:0:root:/root:/bin/bash\n{{expires_at}}\n", "it has no {{token}}"),
        ] {
            #expect(throws: TokenTemplate.Problem.self) { try TokenTemplate(parsing: bad) }
            do {
                _ = try TokenTemplate(parsing: bad)
            } catch {
                #expect(error.description.contains(sentence), "\(error)")
            }
        }
    }

    @Test(
        "--format nginx is an include a real nginx loads (nginx -t) and whose proxied request reaches a loopback upstream carrying the header",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx"))
    )
    func nginxLoadsTheInclude() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let include = scratch + "/authgate-auth.conf"
        let sink = try daemon.cli(["sink", "mock", "--file", include, "--format", "nginx", "--once"])
        #expect(sink.status == 0, "\(sink)")
        let token = try Self.token(daemon)
        #expect((try? String(contentsOfFile: include, encoding: .utf8)) == "proxy_set_header Authorization \"Bearer \(token)\";\n")

        // The upstream echoes the Authorization header it got; it also picks nginx's port.
        let upstream = Process()
        upstream.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        upstream.arguments = [
            "-c",
            """
            import http.server, socket
            class Echo(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    body = (self.headers.get("Authorization") or "none").encode()
                    self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
                def log_message(self, *args): pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Echo)
            spare = socket.socket(); spare.bind(("127.0.0.1", 0)); nginx_port = spare.getsockname()[1]; spare.close()
            print(server.server_address[1], nginx_port, flush=True)
            server.serve_forever()
            """,
        ]
        let ports = Pipe()
        upstream.standardOutput = ports
        try upstream.run()
        defer {
            // SIGKILL: the test process's children inherit its blocked signals, SIGTERM among them.
            kill(upstream.processIdentifier, SIGKILL)
            upstream.waitUntilExit()
        }
        var line = ""
        while !line.hasSuffix("\n") {
            let byte = ports.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            line += String(decoding: byte, as: UTF8.self)
        }
        let numbers = line.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(numbers.count == 2, "\(line)")
        let configuration = scratch + "/nginx.conf"
        try """
        daemon off;
        master_process off;
        pid \(scratch)/nginx.pid;
        error_log \(scratch)/nginx-error.log;
        events { worker_connections 16; }
        http {
            access_log off;
            client_body_temp_path \(scratch)/nginx-body;
            proxy_temp_path \(scratch)/nginx-proxy;
            fastcgi_temp_path \(scratch)/nginx-fastcgi;
            uwsgi_temp_path \(scratch)/nginx-uwsgi;
            scgi_temp_path \(scratch)/nginx-scgi;
            server {
                listen 127.0.0.1:\(numbers[1]);
                location / {
                    include \(include);
                    proxy_pass http://127.0.0.1:\(numbers[0]);
                }
            }
        }
        """.write(toFile: configuration, atomically: true, encoding: .utf8)
        let nginxArguments = ["-p", scratch + "/", "-e", scratch + "/nginx-error.log", "-c", configuration]
        let check = try run(URL(fileURLWithPath: "/usr/sbin/nginx"), ["-t"] + nginxArguments)
        #expect(check.status == 0 && check.stderr.contains("test is successful"), "\(check)")
        let nginx = Process()
        nginx.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        nginx.arguments = nginxArguments
        nginx.standardError = FileHandle.nullDevice
        try nginx.run()
        defer {
            kill(nginx.processIdentifier, SIGKILL)
            nginx.waitUntilExit()
        }
        var answer = ""
        try eventually {
            answer = try run(URL(fileURLWithPath: "/usr/bin/curl"), ["-s", "--max-time", "5", "http://127.0.0.1:\(numbers[1])/"]).stdout
            return !answer.isEmpty
        }
        #expect(answer == "Bearer \(token)", "the upstream got the sink's header")
    }

    @Test("--format env is read by env -i sh (set -a; . FILE), as systemd's EnvironmentFile= would; --env names the variable")
    func envFormat() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let file = daemon.scratch.path + "/token.env"
        let sink = try daemon.cli(["sink", "mock", "--file", file, "--format", "env", "--env", "API_TOKEN", "--once"])
        #expect(sink.status == 0, "\(sink)")
        let shell = try run(URL(fileURLWithPath: "/usr/bin/env"), ["-i", "/bin/sh", "-c", #"set -a; . "$0"; exec /usr/bin/env"#, file])
        #expect(shell.status == 0, "\(shell)")
        let token = try Self.token(daemon)
        #expect(shell.stdout.split(separator: "\n").contains("API_TOKEN=\(token)"), "\(shell.stdout.count) bytes")
        let bad = try daemon.cli(["sink", "mock", "--file", file, "--format", "env", "--env", "2BAD", "--once"])
        #expect(bad.status == 64 && bad.stderr.contains("--env must be a variable name"), "\(bad)")
    }

    @Test("--format template fills each placeholder; an unknown placeholder or a missing --template is refused at start, writing nothing")
    func templateFormat() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        try "token={{token}}\ntype={{ token_type }}\nexpires_at={{expires_at}}\nexpires_in={{expires_in}}\n"
            .write(toFile: scratch + "/template", atomically: true, encoding: .utf8)
        let file = scratch + "/filled"
        let sink = try daemon.cli(["sink", "mock", "--file", file, "--format", "template", "--template", scratch + "/template", "--once"])
        #expect(sink.status == 0, "\(sink)")
        #expect(try daemon.cli(["sink", "mock", "--file", scratch + "/json", "--format", "json", "--once"]).status == 0)
        let json = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: scratch + "/json"))) as? [String: Any])
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init)
        try #require(lines.count == 4, "\(lines.count) lines")
        let token = try Self.token(daemon)
        #expect(lines[0] == "token=\(token)")
        #expect(lines[1] == "type=Bearer")
        #expect(lines[2] == "expires_at=\(json["expires_at"] as? String ?? "?")")
        let seconds = Int(lines[3].dropFirst("expires_in=".count)) ?? -1
        #expect((3000...3600).contains(seconds), "the mock's tokens live 3600 s: \(lines[3])")

        try "Bearer {{token}} {{refresh_token}}\n".write(toFile: scratch + "/bad", atomically: true, encoding: .utf8)
        let unknown = try daemon.cli(["sink", "mock", "--file", scratch + "/never", "--format", "template", "--template", scratch + "/bad"])
        #expect(unknown.status == 64, "\(unknown)")
        #expect(unknown.stderr.contains("the template \(scratch)/bad cannot be used: line 1: unknown placeholder {{refresh_token}}"), "\(unknown.stderr)")
        let missing = try daemon.cli(["sink", "mock", "--file", scratch + "/never", "--format", "template", "--once"])
        #expect(missing.status == 64 && missing.stderr.contains("--format template needs --template FILE"), "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/never"))
    }

    @Test(
        "--owner/--group give the file to the service (it reads it), --mkdir makes 0750 parents of that group; unknown names and a non-root sink are refused",
        .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"))
    )
    func ownerGroupAndMkdir() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        chmod(scratch, 0o755)
        let nogroup = try #require(getgrnam("nogroup")).pointee.gr_gid
        let file = scratch + "/run/app/token"
        let sink = try daemon.cli(["sink", "mock", "--file", file, "--mkdir", "--owner", "nobody", "--group", "nogroup", "--mode", "0440", "--once"])
        #expect(sink.status == 0, "\(sink)")
        func owners(_ path: String) throws -> (mode: Int?, uid: Int?, gid: Int?) {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            return (
                attributes[.posixPermissions] as? Int, (attributes[.ownerAccountID] as? NSNumber)?.intValue,
                (attributes[.groupOwnerAccountID] as? NSNumber)?.intValue
            )
        }
        for path in [scratch + "/run", scratch + "/run/app"] {
            let made = try owners(path)
            #expect(made.mode == 0o750 && made.uid == 0 && made.gid == Int(nogroup), "\(path): \(made)")
        }
        let given = try owners(file)
        #expect(given.mode == 0o440 && given.uid == 65534 && given.gid == Int(nogroup), "\(given)")
        // The service's user reads it.
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=\(nogroup)", "--clear-groups", "--"]
        let read = try run(URL(fileURLWithPath: "/bin/cat"), [file], prefix: asNobody)
        let token = try Self.token(daemon)
        #expect(read.status == 0 && read.stdout == token + "\n", "\(read.stderr)")

        let unknownUser = try daemon.cli(["sink", "mock", "--file", scratch + "/x", "--owner", "no-such-user-30", "--once"])
        #expect(unknownUser.status == 64 && unknownUser.stderr.contains("--owner no-such-user-30: no such user"), "\(unknownUser)")
        let unknownGroup = try daemon.cli(["sink", "mock", "--file", scratch + "/x", "--group", "no-such-group-30", "--once"])
        #expect(unknownGroup.status == 64 && unknownGroup.stderr.contains("--group no-such-group-30: no such group"), "\(unknownGroup)")
        let notRoot = try daemon.cli(["sink", "mock", "--file", "/tmp/x", "--owner", "root", "--once"], prefix: asNobody)
        #expect(notRoot.status == 64 && notRoot.stderr.contains("--owner and --group need root"), "\(notRoot)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/x"))
    }

    @Test("--once exits non-zero without a word of reconnecting when the file is not written (a missing directory, a name that is a directory)")
    func onceFailures() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let missing = try daemon.cli(["sink", "mock", "--file", scratch + "/missing/token", "--once"])
        #expect(missing.status == 64 && missing.stderr.contains("cannot open the directory \(scratch)/missing"), "\(missing)")
        try FileManager.default.createDirectory(atPath: scratch + "/taken/inner", withIntermediateDirectories: true)
        let taken = try daemon.cli(["sink", "mock", "--file", scratch + "/taken", "--once"])
        #expect(
            taken.status == 1 && taken.stderr.contains("cannot write \(scratch)/taken") && taken.stderr.contains("the sink did not write \(scratch)/taken"),
            "\(taken)"
        )
        let written = try daemon.cli(["sink", "mock", "--file", scratch + "/token", "--once"])
        #expect(written.status == 0, "\(written)")
        for output in [missing, taken, written] { #expect(!output.stderr.contains("reconnecting"), "\(output.stderr)") }
    }

    @Test(
        "--on-change runs in the background: one that hangs does not hold up the next write, gets SIGTERM after --on-change-timeout, SIGKILL 5 s later, and the next run follows"
    )
    func onChangeTimeout() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.quicklyRefreshedMock], logLevel: "info")
        try daemon.signIn()
        let scratch = daemon.scratch.path
        let file = scratch + "/token"
        let runs = scratch + "/runs"
        // It ignores SIGTERM, so that only the SIGKILL stops it.
        let sink = try daemon.backgroundCLI(
            [
                "sink", "mock", "--file", file, "--on-change-timeout", "3", "--on-change", "/bin/sh", "-c",
                "echo $$ >> \(scratch)/pids; cat \(file) >> \(runs); trap '' TERM; exec sleep 600",
            ]
        )
        func started() -> [String] { ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }
        defer {
            // Its last run may still be sleeping (and holding the sink's stderr): each run is a
            // process group of its own, whose pid is in pids before its token is in runs.
            for line in (try? String(contentsOfFile: scratch + "/pids", encoding: .utf8))?.split(separator: "\n") ?? [] {
                if let pid = Int32(line) { kill(-pid, SIGKILL) }
            }
        }
        try eventually { started().count == 1 }
        let first = started()[0] + "\n"
        // The next refresh is written while the first run still hangs (it ends only with the SIGKILL).
        try eventually { ((try? String(contentsOfFile: file, encoding: .utf8)) ?? first) != first }
        #expect(!sink.stderr.contains("sent it SIGKILL"), "written while the first run still ran: \(sink.stderr)")
        #expect(started().count == 1, "one run at a time")
        try eventually(timeout: .seconds(30)) { sink.stderr.contains("ignored SIGTERM; sent it SIGKILL") }
        #expect(sink.stderr.contains("--on-change /bin/sh still ran after 3 s; sent it SIGTERM"), "\(sink.stderr)")
        // The sink says so once it has reaped the run, a moment after the SIGKILL.
        try? eventually { sink.stderr.contains("--on-change /bin/sh was killed by signal 9") }
        #expect(sink.stderr.contains("--on-change /bin/sh was killed by signal 9"), "\(sink.stderr)")
        // The writes that came meanwhile make one more run, with the newest token.
        try eventually { started().count == 2 }
        #expect(sink.isRunning, "a failing --on-change is not fatal")
    }

    @Test("a sink started before the sign-in writes the file within a second of it, says once why it waits, and says why it removes the file")
    func sinkSeesTheSignIn() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], arguments: ["--idle-timeout", "1"], logLevel: "info")
        let file = daemon.scratch.path + "/token"
        let sink = try daemon.backgroundCLI(["sink", "mock", "--file", file])
        try eventually { sink.stderr.contains("waiting for a sign-in") }
        // At least a second goes by (a connection opened now is closed as idle): a sink that
        // retried (the old 1 s, 2 s, 4 s… backoff) would have asked again by then; this one
        // asked once, then waits on the daemon.
        let idle = try daemon.connect()
        _ = try exchange(idle, #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}"#)
        #expect(try idle.receiveLine() == nil, "closed as idle")
        let refusedWatches = #"authgate_rpc_requests_total{method="token.watch",outcome="login_required"}"#
        let metrics = try daemon.cli(["metrics"]).stdout.split(separator: "\n").filter { $0.hasPrefix(refusedWatches) }
        #expect(metrics == ["\(refusedWatches) 1"], "\(metrics)")
        let asked = ContinuousClock.now
        try daemon.signIn()
        let signedIn = ContinuousClock.now
        try eventually(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: file) }
        let latency = ContinuousClock.now - signedIn
        print("sink: the file appeared \(latency) after `authgate login` returned (\(signedIn - asked) after it started)")
        #expect(latency < .seconds(1), "\(latency): told by the daemon, not found by a retry")
        #expect(Self.occurrences(of: "waiting for a sign-in", in: sink.stderr) == 1, "\(sink.stderr)")
        #expect(sink.stderr.contains("[login_required]; waiting for a sign-in."), "\(sink.stderr)")

        #expect(try daemon.cli(["logout", "mock"]).status == 0)
        try eventually { sink.stderr.contains("removed \(file): the session ended (logged_out)") }
        // Signed in again, much later than any retry's first steps: still at once.
        try daemon.signIn()
        try eventually(timeout: .seconds(3)) { FileManager.default.fileExists(atPath: file) }
    }

    /// A root-only file, as /etc/shadow is: what another user would have root's sink copy.
    static func rootSecret(in directory: String) throws -> String {
        let secret = directory + "/root-only"
        try "ROOT-ONLY-CONTENT {{token}}\n".write(toFile: secret, atomically: false, encoding: .utf8)
        #expect(chmod(secret, 0o600) == 0)
        return secret
    }
}
