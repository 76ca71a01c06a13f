import CLinux
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// 9. `authgate proxy` beside nginx (`authgate-bench --only proxy`, about 50 s): what the proxy
/// adds to a request on loopback, and how many it carries next to nginx's own `proxy_pass`
/// with the token `authgate sink --format nginx` keeps in an include, the way a service is
/// given a token without the proxy. The upstream is an nginx answering `return 200` (one
/// worker), so that the upstream costs each path alike and little; every load is
/// bench/http_load.c on kept-alive connections, so that connecting is never measured.
extension AuthGateBench {
    /// The goals of the proxy's issue: what it adds at p50 on one connection, in µs, and its
    /// requests a second as a fraction of nginx proxy_pass's.
    static let proxyAddedP50Goal = 200.0
    static let proxyRateGoal = 0.8

    func proxyCost(_ work: WorkDirectory) throws -> String {
        guard let httpLoad else { throw BenchError("the proxy part needs --http-load (bench/http_load.c, built by scripts/bench)") }
        let authgate = cli ?? binDirectory + "/authgate"
        // Without the command, `authgate proxy --help` is the CLI's own help (exit 0).
        if !proxyStandIn, (try? runProgram(authgate, ["proxy", "--help"], quiet: true))?.contains("--upstream") != true {
            return "### `authgate proxy` beside nginx\n\nSkipped: this build's `authgate` has no `proxy` command.\n"
        }
        let daemon = try BenchDaemon(binary: binDirectory + "/authgated", work: work, name: "proxy", providers: ["mock.json": Self.mockProvider])
        defer { daemon.stop() }
        try daemon.signIn()
        let environment = ["AUTHGATE_SOCKET": daemon.socketPath]

        let upstream = try Nginx(work: work, name: "upstream", workers: "1") { port in
            """
            server {
                listen 127.0.0.1:\(port);
                keepalive_requests 1000000;
                location / { return 200 "ok\\n"; }
            }
            """
        }
        defer { upstream.stop() }
        // nginx's way: the token in an include that `authgate sink` writes (--once: the session
        // is signed in and its token lasts a day, longer than the bench).
        let include = work.path + "/proxy-authorization.conf"
        _ = try runProgram(authgate, ["sink", "mock", "--file", include, "--format", "nginx", "--once"], environment: environment, quiet: true)
        // nginx's proxy_pass to the upstream at `port`, over TLS (verified against `ca`) when
        // `tls` is true.
        func nginxProxy(_ name: String, to port: Int, tls: Bool = false) throws -> Nginx {
            let verification =
                tls
                ? """
                        proxy_ssl_verify on;
                        proxy_ssl_trusted_certificate \(work.path)/upstream-cert.pem;
                        proxy_ssl_name 127.0.0.1;
                        proxy_ssl_session_reuse on;
                """ : ""
            return try Nginx(work: work, name: name, workers: "auto") { listenPort in
                """
                upstream authgate_bench_upstream {
                    server 127.0.0.1:\(port);
                    keepalive 64;
                    keepalive_requests 1000000;
                }
                server {
                    listen 127.0.0.1:\(listenPort);
                    keepalive_requests 1000000;
                    location / {
                        proxy_pass \(tls ? "https" : "http")://authgate_bench_upstream;
                        proxy_http_version 1.1;
                        proxy_set_header Connection "";
                \(verification)
                        include \(include);
                    }
                }
                """
            }
        }
        // `authgate proxy` to the upstream at `url` (or nginx standing in for it), with its pid
        // and its name in the tables.
        func ourProxy(
            _ name: String,
            to url: String,
            arguments: [String] = [],
            tls: Bool = false
        ) throws -> (stop: () -> Void, port: Int, pid: Int32, name: String) {
            if proxyStandIn {
                let standIn = try nginxProxy(name, to: Int(url.split(separator: ":").last ?? "") ?? 0, tls: tls)
                return ({ standIn.stop() }, standIn.port, standIn.pid, "nginx proxy_pass standing in for `authgate proxy`")
            }
            let proxy = try ProxyProcess(
                program: authgate,
                arguments: ["proxy", "mock", "--upstream", url, "--listen", "127.0.0.1:0"] + arguments,
                environment: environment,
                log: work.path + "/\(name).log"
            )
            return ({ proxy.stop() }, proxy.port, proxy.pid, "`authgate proxy`")
        }
        let nginx = try nginxProxy("nginx-proxy", to: upstream.port)
        defer { nginx.stop() }
        let ours = try ourProxy("proxy", to: "http://127.0.0.1:\(upstream.port)")
        defer { ours.stop() }
        let (proxyPort, proxyPID, proxyName) = (ours.port, ours.pid, ours.name)

        let generator = HTTPLoad(program: httpLoad)
        // Every path answers, and the proxies pass the token, before anything is measured.
        for port in [upstream.port, proxyPort, nginx.port] {
            let result = try generator.run(port: port, connections: 1, duration: 0.3)
            guard result.requests > 0, result.errors == 0 else {
                throw BenchError("127.0.0.1:\(port) does not answer 200 (\(result.errors) errors; see \(work.path)/proxy.log)")
            }
        }

        // Latency: one connection, one request after the other; the three paths take turns, twice.
        let paths = [("direct to the upstream", upstream.port), ("through " + proxyName, proxyPort), ("through nginx proxy_pass", nginx.port)]
        var latencies = [[HTTPLoadResult]](repeating: [], count: paths.count)
        for _ in 0..<2 {
            for (index, path) in paths.enumerated() {
                latencies[index].append(try generator.run(port: path.1, connections: 1, duration: seconds))
            }
        }
        func mean(_ results: [HTTPLoadResult], _ value: (HTTPLoadResult) -> Double) -> Double {
            results.map(value).reduce(0, +) / Double(results.count)
        }
        let directP50 = mean(latencies[0]) { $0.p50 }
        let directP99 = mean(latencies[0]) { $0.p99 }
        let latencyRows = paths.indices.map { index -> [String] in
            let p50 = mean(latencies[index]) { $0.p50 }
            let p99 = mean(latencies[index]) { $0.p99 }
            let added = index == 0 ? ["–", "–"] : [String(format: "%+.0f", p50 - directP50), String(format: "%+.0f", p99 - directP99)]
            let goal =
                index == 1
                ? (p50 - directP50 <= Self.proxyAddedP50Goal ? "**met**" : "not met") + String(format: " (added p50 ≤ %.0f µs)", Self.proxyAddedP50Goal) : "–"
            return [paths[index].0, String(format: "%.0f", p50), String(format: "%.0f", p99)] + added + [goal]
        }

        // Throughput: the proxy and nginx in turn, twice, at each number of connections, with
        // the CPU time each proxy's processes (nginx: its master and workers) spent per request,
        // and authgated's during the proxy's runs (where the proxy's tokens come from).
        func measured(_ port: Int, _ pid: Int32, connections: Int) throws -> (HTTPLoadResult, Double, Double) {
            let before = (processTreeCPUSeconds(pid), processTreeCPUSeconds(daemon.pid))
            let result = try generator.run(port: port, connections: connections, duration: seconds)
            let requests = Double(max(1, result.requests))
            return (
                result, (processTreeCPUSeconds(pid) - before.0) * 1e6 / requests,
                (processTreeCPUSeconds(daemon.pid) - before.1) * 1e6 / requests
            )
        }
        // The proxy and nginx in turn, twice, at each number of connections.
        func throughput(ourPort: Int, ourPID: Int32, nginxPort: Int, nginxPID: Int32, upstreamPort: Int?) throws -> [[String]] {
            var rows: [[String]] = []
            for connections in [32, 1] {
                var ours: [HTTPLoadResult] = []
                var theirs: [HTTPLoadResult] = []
                var ourCPU: [Double] = []
                var theirCPU: [Double] = []
                var daemonCPU: [Double] = []
                for _ in 0..<2 {
                    let (our, ourTime, daemonTime) = try measured(ourPort, ourPID, connections: connections)
                    let (their, theirTime, _) = try measured(nginxPort, nginxPID, connections: connections)
                    ours.append(our)
                    theirs.append(their)
                    ourCPU.append(ourTime)
                    theirCPU.append(theirTime)
                    daemonCPU.append(daemonTime)
                }
                // Directly only in plain HTTP: the generator speaks no TLS.
                let direct = try upstreamPort.map { try generator.run(port: $0, connections: connections, duration: seconds) }
                guard (ours + theirs).allSatisfy({ $0.errors == 0 }) else {
                    throw BenchError("errors under load: \((ours + theirs).map { "\($0.errors) (\($0.statusErrors) statuses)" })")
                }
                let rate = mean(ours) { $0.requestsPerSecond } / mean(theirs) { $0.requestsPerSecond }
                func rates(_ results: [HTTPLoadResult]) -> String {
                    String(format: "%.0f (", mean(results) { $0.requestsPerSecond })
                        + results.map { String(format: "%.0f", $0.requestsPerSecond) }.joined(separator: ", ") + ")"
                }
                rows.append([
                    "\(connections)", rates(ours), rates(theirs), String(format: "%.2f", rate),
                    String(format: "%.0f / %.0f", mean(ours) { $0.p99 }, mean(theirs) { $0.p99 }),
                    String(format: "%.1f / %.1f", ourCPU.reduce(0, +) / 2, theirCPU.reduce(0, +) / 2), String(format: "%.1f", daemonCPU.reduce(0, +) / 2),
                    direct.map { String(format: "%.0f", $0.requestsPerSecond) } ?? "–",
                    String(format: "%.1f / %.1f", mean(ours) { $0.generatorCPUPerRequest }, mean(theirs) { $0.generatorCPUPerRequest }),
                    (rate >= Self.proxyRateGoal ? "**met**" : "not met") + String(format: " (≥ %.1f × nginx)", Self.proxyRateGoal),
                ])
            }
            return rows
        }
        let throughputRows = try throughput(ourPort: proxyPort, ourPID: proxyPID, nginxPort: nginx.port, nginxPID: nginx.pid, upstreamPort: upstream.port)
        ours.stop()
        nginx.stop()

        // The same over TLS to the upstream (the common case: an API elsewhere), verified by
        // both proxies against the upstream's own certificate, which openssl makes here.
        let certificate = work.path + "/upstream-cert.pem"
        let key = work.path + "/upstream-key.pem"
        _ = try runProgram(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", certificate, "-days", "2",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ],
            quiet: true
        )
        let tlsUpstream = try Nginx(work: work, name: "tls-upstream", workers: "1") { port in
            """
            server {
                listen 127.0.0.1:\(port) ssl;
                ssl_certificate \(certificate);
                ssl_certificate_key \(key);
                keepalive_requests 1000000;
                location / { return 200 "ok\\n"; }
            }
            """
        }
        defer { tlsUpstream.stop() }
        let tlsNginx = try nginxProxy("tls-nginx-proxy", to: tlsUpstream.port, tls: true)
        defer { tlsNginx.stop() }
        let tlsOurs = try ourProxy("tls-proxy", to: "https://127.0.0.1:\(tlsUpstream.port)", arguments: ["--ca-file", certificate], tls: true)
        defer { tlsOurs.stop() }
        for port in [tlsOurs.port, tlsNginx.port] {
            let result = try generator.run(port: port, connections: 1, duration: 0.3)
            guard result.requests > 0, result.errors == 0 else {
                throw BenchError("127.0.0.1:\(port) does not answer 200 over TLS (\(result.errors) errors; see \(work.path)/tls-proxy.log)")
            }
        }
        let tlsRows = try throughput(ourPort: tlsOurs.port, ourPID: tlsOurs.pid, nginxPort: tlsNginx.port, nginxPID: tlsNginx.pid, upstreamPort: nil)

        return "### \(proxyName) beside nginx proxy_pass (loopback, \(seconds) s per run)\n\n"
            + "The upstream is nginx (`/usr/sbin/nginx`, one worker) answering `return 200 \"ok\\n\"`; nginx proxy_pass "
            + "(`worker_processes auto`, `keepalive 64` to the upstream, HTTP/1.1) sends the token from an include written by "
            + "`authgate sink mock --format nginx`. The load generator is `bench/http_load.c` (one thread, epoll, kept-alive connections, "
            + "`GET /`; latency from the send to the response's last byte). Each figure is the mean of two runs, the paths taking turns (direct to the upstream: one run).\n\n"
            + "Latency, one connection, one request after the other:\n\n"
            + table(["path", "p50 µs", "p99 µs", "added p50 µs", "added p99 µs", "goal"], latencyRows)
            + "\nRequests a second, kept-alive connections:\n\n"
            + table(
                [
                    "connections", "\(proxyName) req/s (runs)", "nginx proxy_pass req/s (runs)", "ratio", "p99 µs (ours / nginx's)",
                    "proxy CPU µs/request (ours / nginx's)", "authgated CPU µs/request (ours)", "direct to the upstream req/s",
                    "generator CPU µs/request (ours / nginx's)", "goal",
                ],
                throughputRows
            )
            + "\nThe same with the upstream over TLS (nginx `listen ssl`, an ECDSA P-256 certificate made by openssl for 127.0.0.1; "
            + "`authgate proxy --ca-file` and nginx's `proxy_ssl_verify` trust it, both keep their connections and TLS sessions); "
            + "the load still reaches both proxies in plain HTTP on loopback:\n\n"
            + table(
                [
                    "connections", "\(proxyName) req/s (runs)", "nginx proxy_pass req/s (runs)", "ratio", "p99 µs (ours / nginx's)",
                    "proxy CPU µs/request (ours / nginx's)", "authgated CPU µs/request (ours)", "direct to the upstream req/s",
                    "generator CPU µs/request (ours / nginx's)", "goal",
                ],
                tlsRows
            )
            + "\nRepeat with `scripts/bench --only proxy` (a release build; about 80 s at 3 s a run).\n"
    }
}

/// What one bench/http_load.c run measured.
struct HTTPLoadResult: Decodable {
    var requests: Int
    var errors: Int
    var statusErrors: Int
    var reconnects: Int
    var requestsPerSecond: Double
    var p50: Double
    var p99: Double
    /// The generator's own CPU time per request, in microseconds.
    var generatorCPUPerRequest: Double

    enum CodingKeys: String, CodingKey {
        case requests, errors, reconnects
        case statusErrors = "status_errors"
        case requestsPerSecond = "requests_per_second"
        case p50 = "p50_us"
        case p99 = "p99_us"
        case generatorCPUPerRequest = "cpu_us_per_request"
    }
}

/// Drives an HTTP server on loopback with `bench/http_load.c`: `connections` kept-alive
/// connections, each a closed loop of `GET /` and its whole response, on one epoll thread.
struct HTTPLoad {
    /// The compiled `bench/http_load.c`.
    let program: String

    func run(port: Int, connections: Int, duration: Double, path: String = "/") throws -> HTTPLoadResult {
        let output = try runProgram(program, ["--port", "\(port)", "--path", path, "--connections", "\(connections)", "--seconds", "\(duration)"])
        do {
            return try JSONDecoder().decode(HTTPLoadResult.self, from: Data(output.utf8))
        } catch {
            throw BenchError("the HTTP load generator printed \(output)")
        }
    }
}

/// Debian's nginx in the foreground, as the current user, on a configuration of its own in a
/// scratch directory (its pid file, error log and temporary files there too) and a free
/// loopback port.
final class Nginx {
    let port: Int
    private let process = Process()
    private let errorLog: String

    /// The master's; its workers are its children.
    var pid: Int32 { process.processIdentifier }

    /// - Parameter workers: `worker_processes` ("1", "auto").
    /// - Parameter servers: The `http` block's contents for the port it is given.
    init(work: WorkDirectory, name: String, workers: String, servers: (Int) -> String) throws {
        let binary = "/usr/sbin/nginx"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("\(binary) is missing (scripts/bench installs Debian's nginx)")
        }
        let directory = work.path + "/\(name)-nginx"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = try freeLoopbackPort()
        errorLog = directory + "/error.log"
        // Root's workers would otherwise run as nobody; anyone else's stay as they are.
        let user = geteuid() == 0 ? "user root;\n" : ""
        let temporary = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map { "    \($0)_temp_path \(directory)/\($0)_temp;" }
        let configuration = """
            \(user)daemon off;
            worker_processes \(workers);
            pid \(directory)/nginx.pid;
            error_log \(errorLog) warn;
            events { worker_connections 1024; }
            http {
                access_log off;
            \(temporary.joined(separator: "\n"))
            \(servers(port))
            }

            """
        try Data(configuration.utf8).write(to: URL(fileURLWithPath: directory + "/nginx.conf"))
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-p", directory, "-e", errorLog, "-c", directory + "/nginx.conf"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while !loopbackPortAnswers(port) {
            guard process.isRunning, Date() < deadline else {
                let log = (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? ""
                throw BenchError("nginx (\(name)) did not start on 127.0.0.1:\(port): \(log.suffix(600))")
            }
            usleep(5_000)
        }
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// `authgate proxy`, started with its arguments; its port is the one its first line on stdout
/// names (`listening on 127.0.0.1:PORT`).
final class ProxyProcess {
    let port: Int
    private let process = Process()
    private let log: String

    init(program: String, arguments: [String], environment: [String: String], log: String) throws {
        self.log = log
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        let line = readLine(output.fileHandleForReading.fileDescriptor, timeout: 10)
        let prefix = "listening on 127.0.0.1:"
        guard let line, line.hasPrefix(prefix), let port = Int(line.dropFirst(prefix.count)) else {
            process.terminate()
            process.waitUntilExit()
            let logged = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchError("`authgate \(arguments.joined(separator: " "))` printed \(line.map { "\"\($0)\"" } ?? "no line"): \(logged.suffix(600))")
        }
        self.port = port
    }

    var pid: Int32 { process.processIdentifier }

    /// The end of what it logged, for an error.
    var logTail: String { String(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(600)) }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// The first line `descriptor` delivers within `timeout` seconds, without its newline; nil
/// when it ends or falls silent first.
private func readLine(_ descriptor: Int32, timeout: Double) -> String? {
    let deadline = Date().addingTimeInterval(timeout)
    var bytes: [UInt8] = []
    while true {
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return nil }
        var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, Int32(left * 1000) + 1) > 0 else { continue }
        var byte: UInt8 = 0
        guard read(descriptor, &byte, 1) == 1 else { return nil }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

/// The user and system CPU time of process `pid` and its children (nginx's workers), in
/// seconds, from /proc.
func processTreeCPUSeconds(_ pid: Int32) -> Double {
    let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    var ticks = 0
    let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for name in processes where name.first?.isNumber == true {
        let stat = (try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8)) ?? ""
        // After the command's closing parenthesis: state is field 3, ppid 4, utime 14 and stime 15.
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        guard fields.count > 13, Int32(name) == pid || Int32(fields[1]) == pid else { continue }
        ticks += (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }
    return Double(ticks) / ticksPerSecond
}

/// A loopback TCP port free now: bound to port 0, read back, closed (nginx listens on it
/// next; it cannot report a port the kernel chose).
func freeLoopbackPort() throws -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &length) == 0
        }
    }
    guard bound else { throw BenchError("cannot bind a loopback port: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts connections on 127.0.0.1:`port`.
func loopbackPortAnswers(_ port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = loopbackAddress(port: port)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

private func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
}
