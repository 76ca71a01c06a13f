import ArgumentParser
import AuthGateClient
import AuthGateCore
import AuthGateRPC
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `authgate-bench`: measures the release daemon and CLI and prints Markdown tables.
/// `scripts/bench` builds it and writes its output, with the machine, into docs/BENCHMARKS.md.
@main
struct AuthGateBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authgate-bench",
        abstract: "Measures authgated and authgate (use a release build) and prints Markdown tables."
    )

    @Option(help: ArgumentHelp("Directory with the built authgate (the daemon is its authgated link, made here if missing).", valueName: "dir"))
    var binDirectory: String

    @Option(help: ArgumentHelp("The authgate to time (default: the one in --bin-directory).", valueName: "path"))
    var cli: String?

    @Option(help: ArgumentHelp("The repository (for Tests/idp/faulty.py).", valueName: "dir"))
    var repository = "."

    @Option(help: ArgumentHelp("Python with the test providers' packages; without it the start-up figures are skipped.", valueName: "path"))
    var python: String?

    @Option(help: ArgumentHelp("The compiled bench/load.c (the load generator).", valueName: "path"))
    var load: String

    @Option(help: ArgumentHelp("The compiled bench/floor.c (the trivial server measured beside the daemon).", valueName: "path"))
    var floor: String

    @Option(
        help: ArgumentHelp(
            "The compiled bench/client.c (a static C client making authgate token's call), timed beside the CLI (cli).",
            valueName: "path"
        )
    )
    var client: String?

    @Option(help: ArgumentHelp("The compiled bench/http_load.c (the HTTP load generator; proxy).", valueName: "path"))
    var httpLoad: String?

    @Flag(
        help: "Measure a second nginx proxy_pass in `authgate proxy`'s place (proxy): checks the bench itself, whose ratio should then be about 1."
    )
    var proxyStandIn = false

    @Option(help: "Seconds each load run lasts.")
    var seconds = 3.0

    @Option(help: "Runs of `authgate token` as a whole process.")
    var runs = 500

    @Option(help: "Signed-in mock sessions to measure memory at (cumulative).")
    var sessions: [Int] = [1, 1_000, 10_000, 100_000]

    @Option(help: "Only these parts: hot, metrics, cli, memory, burst, startup, refresh, sink, fleet, proxy.")
    var only: [String] = []

    @Option(help: "The fleet's daemons, started within a second (fleet).")
    var fleetDaemons = 200

    @Option(help: "The token requests a second the fleet's provider answers before it throttles (fleet).")
    var fleetRate = 50

    @Option(
        help:
            "The fleet's refresh.first_use_spread_seconds: each daemon's first requests spread at random over its first that many seconds (fleet; default 2.5 × daemons ÷ rate, 0 for none)."
    )
    var fleetSpread: Int?

    @Option(help: "Scales the refresh loads' durations (1: 2, 5 and 1 minutes).")
    var refreshScale = 1.0

    func run() throws {
        let work = try WorkDirectory()
        // authgate is the daemon by that name, as installed (scripts/lib.sh's link_programs).
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: binDirectory + "/authgated")) == nil {
            try? FileManager.default.removeItem(atPath: binDirectory + "/authgated")
            try FileManager.default.createSymbolicLink(atPath: binDirectory + "/authgated", withDestinationPath: "authgate")
        }
        let parts = Set(only.isEmpty ? ["hot", "metrics", "cli", "memory", "burst", "startup", "refresh", "sink", "fleet", "proxy"] : only)
        if parts.contains("hot") { print(try hotPath(work)) }
        if parts.contains("metrics") { print(try metricsCost(work)) }
        if parts.contains("cli") { print(try cliProcess(work)) }
        if parts.contains("memory") { print(try memory(work)) }
        if parts.contains("burst") { print(try memoryAfterBurst(work)) }
        if parts.contains("startup"), let python {
            print(try startUp(work, python: python))
        }
        if parts.contains("refresh") { print(try refreshAtScale(work)) }
        if parts.contains("sink") { print(try sinkLatency(work)) }
        if parts.contains("fleet"), let python { print(try fleet(work, python: python)) }
        if parts.contains("proxy") { print(try proxyCost(work)) }
    }

    // MARK: 1. The token RPC on a cached token

    static let mockProvider = #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": 86400}"#
    static let tokenRequest = #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}"#

    /// The `token` targets docs/BENCHMARKS.md holds, as fractions of the floor in the same run: rate at least, p99 at most.
    static let targets: [String: (rate: Double, p99: Double?)] = [
        "connection per request|1": (0.75, nil), "connection per request|32": (0.7, 1.3), "keep-alive|64": (0.75, 2.0),
    ]

    func hotPath(_ work: WorkDirectory) throws -> String {
        let floorServer = try FloorServer(
            program: floor,
            socketPath: work.path + "/floor.sock",
            answer: #"{"jsonrpc":"2.0","id":1,"result":{"access_token":"x"}}"#
        )
        defer { floorServer.stop() }
        let daemon = try BenchDaemon(binary: binDirectory + "/authgated", work: work, name: "hot", providers: ["mock.json": Self.mockProvider])
        defer { daemon.stop() }
        try daemon.signIn()
        _ = try daemon.client.callBlocking(.token, TokenParams(provider: "mock"), as: TokenResult.self)

        var rows: [[String]] = []
        for mode in [LoadGenerator.Mode.connectionPerRequest, .keepAlive] {
            for clients in [1, 32, 64] {
                // The floor and the daemon one after the other, so that both meet the same machine.
                let floorResult = try LoadGenerator(program: load, socketPath: floorServer.socketPath, requestLine: Self.tokenRequest)
                    .run(clients: clients, mode: mode, duration: seconds)
                let result = try LoadGenerator(program: load, socketPath: daemon.socketPath, requestLine: Self.tokenRequest)
                    .run(clients: clients, mode: mode, duration: seconds)
                guard result.errors == 0, floorResult.errors == 0 else { throw BenchError("errors under load") }
                let rate = result.requestsPerSecond / floorResult.requestsPerSecond
                let p99 = result.p99 / floorResult.p99
                let target =
                    Self.targets["\(mode.rawValue)|\(clients)"].map { target -> String in
                        let met = rate >= target.rate && target.p99.map { p99 <= $0 } != false
                        return (met ? "**met**" : "not met") + String(format: " (≥ %.2f", target.rate)
                            + (target.p99.map { String(format: ", p99 ≤ %.1f×", $0) } ?? "") + ")"
                    } ?? "–"
                rows.append([
                    mode.rawValue, "\(clients)",
                    String(format: "%.0f", floorResult.requestsPerSecond), String(format: "%.0f", floorResult.p99),
                    String(format: "%.0f", result.requestsPerSecond), String(format: "%.2f", rate),
                    String(format: "%.0f", result.p50), String(format: "%.0f", result.p99), String(format: "%.2f", p99),
                    String(format: "%.1f / %.1f", floorResult.generatorCPUPerRequest, result.generatorCPUPerRequest), target,
                ])
            }
        }
        return "### `token` on a cached token, beside the floor (\(seconds) s per row)\n\n"
            + "The floor is `bench/floor.c`, a single-threaded epoll server that answers every line with a fixed line; "
            + "the load generator is `bench/load.c`, all clients on one thread. Fractions are authgated's figure over the floor's.\n\n"
            + table(
                [
                    "connections", "clients", "floor req/s", "floor p99 µs", "authgated req/s", "of floor", "authgated p50 µs",
                    "authgated p99 µs", "p99 of floor's", "generator CPU µs/request (floor / authgated)", "target",
                ],
                rows
            )
    }

    /// The metrics' cost on the cached `token` path: the same load against a daemon that keeps
    /// metrics and one started with `--no-metrics`, alternated three times so that drift of
    /// the machine falls on both.
    func metricsCost(_ work: WorkDirectory) throws -> String {
        let loads: [(LoadGenerator.Mode, Int)] = [(.keepAlive, 1), (.keepAlive, 64), (.connectionPerRequest, 32)]
        var rates: [String: [Double]] = [:]
        var p99s: [String: [Double]] = [:]
        for round in 0..<3 {
            for metrics in [true, false] {
                let daemon = try BenchDaemon(
                    binary: binDirectory + "/authgated",
                    work: work,
                    name: "metrics-\(round)-\(metrics)",
                    providers: ["mock.json": Self.mockProvider],
                    arguments: metrics ? [] : ["--no-metrics"]
                )
                try daemon.signIn()
                for (mode, clients) in loads {
                    let result = try LoadGenerator(program: load, socketPath: daemon.socketPath, requestLine: Self.tokenRequest)
                        .run(clients: clients, mode: mode, duration: seconds)
                    guard result.errors == 0 else { throw BenchError("\(result.errors) errors under load") }
                    let key = "\(mode.rawValue)|\(clients)|\(metrics)"
                    rates[key, default: []].append(result.requestsPerSecond)
                    p99s[key, default: []].append(result.p99)
                }
                daemon.stop()
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let rows = loads.map { mode, clients -> [String] in
            let on = median(rates["\(mode.rawValue)|\(clients)|true"] ?? [0])
            let off = median(rates["\(mode.rawValue)|\(clients)|false"] ?? [1])
            return [
                mode.rawValue, "\(clients)", String(format: "%.0f", on), String(format: "%.0f", off), String(format: "%+.1f %%", (on / off - 1) * 100),
                String(format: "%.0f", median(p99s["\(mode.rawValue)|\(clients)|true"] ?? [0])),
                String(format: "%.0f", median(p99s["\(mode.rawValue)|\(clients)|false"] ?? [0])),
            ]
        }
        return "### The metrics' cost on the cached `token` path (median of 3 alternated runs, \(seconds) s each)\n\n"
            + table(["connections", "clients", "requests/s with metrics", "without (--no-metrics)", "difference", "p99 µs with", "p99 µs without"], rows)
    }

    // MARK: 2. `authgate token` as a whole process

    func cliProcess(_ work: WorkDirectory) throws -> String {
        let provider =
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": 86400, "credential_helper": {"hosts": ["git.example.com"]}}"#
        let daemon = try BenchDaemon(binary: binDirectory + "/authgated", work: work, name: "cli", providers: ["mock.json": provider])
        try daemon.signIn()
        let environment = ["AUTHGATE_SOCKET": daemon.socketPath, "PATH": "/usr/bin:/bin"]
        let authgate = cli ?? binDirectory + "/authgate"
        // git runs its helper by name: a link, as scripts/install makes.
        let gitHelper = work.path + "/git-credential-authgate"
        try? FileManager.default.removeItem(atPath: gitHelper)
        try FileManager.default.createSymbolicLink(atPath: gitHelper, withDestinationPath: URL(fileURLWithPath: authgate).path)
        let gitRequest = work.path + "/git-request"
        try work.write("git-request", "protocol=https\nhost=git.example.com\n\n")
        let dockerHelper = work.path + "/docker-credential-authgate"
        try? FileManager.default.removeItem(atPath: dockerHelper)
        try FileManager.default.createSymbolicLink(atPath: dockerHelper, withDestinationPath: URL(fileURLWithPath: authgate).path)
        let dockerRequest = work.path + "/docker-request"
        try work.write("docker-request", "git.example.com\n")
        var commands: [(name: String, arguments: [String], stdin: String?)] = [
            ("`/bin/true` (the cost of a process)", ["/bin/true"], nil),
            ("`authgate token mock`", [authgate, "token", "mock"], nil),
            ("`authgate kubectl mock` (an ExecCredential)", [authgate, "kubectl", "mock"], nil),
            ("`git-credential-authgate get` (one credential.get)", [gitHelper, "get"], gitRequest),
            ("`docker-credential-authgate get` (one credential.get)", [dockerHelper, "get"], dockerRequest),
        ]
        // The floor of the CLI's own call: a static C client doing the same (bench/client.c).
        if let client { commands.append(("`client mock` (bench/client.c: connect, one line, read, print; static C)", [client, "mock"], nil)) }
        for command in commands {
            _ = try timeProcesses(command.arguments, environment: environment, runs: 20, stdin: command.stdin)  // warm the page cache
        }
        // In rounds of 25 runs of each command in turn, so that a change in the machine's speed
        // while it runs (a virtual machine's neighbours) weighs on every command alike.
        var times = [[Double]](repeating: [], count: commands.count)
        for _ in 0..<(runs + 24) / 25 {
            for (index, command) in commands.enumerated() {
                times[index] += try timeProcesses(command.arguments, environment: environment, runs: 25, stdin: command.stdin)
            }
        }
        let token = quantile(times[1].sorted(), 0.5)
        let floor = client == nil ? nil : quantile(times[commands.count - 1].sorted(), 0.5)
        var rows = zip(commands, times).map { command, times -> [String] in
            let sorted = times.sorted()
            return [
                command.name, "\(sorted.count)", String(format: "%.2f", quantile(sorted, 0.5) / 1000), String(format: "%.2f", quantile(sorted, 0.99) / 1000),
                command.arguments[0] == "/bin/true" ? "–" : String(format: "%.2f", quantile(sorted, 0.5) / token),
            ]
        }
        daemon.stop()
        var header = ["command", "runs", "p50 ms", "p99 ms", "p50 ÷ `authgate token`'s"]
        if let floor {
            header.append("p50 ÷ the C client's (`authgate token`: goal ≤ 1.3)")
            for index in rows.indices {
                let p50 = quantile(times[index].sorted(), 0.5)
                let ratio = String(format: "%.2f", p50 / floor)
                rows[index].append(
                    index == 1 ? ratio + (p50 / floor <= 1.3 ? " **met**" : " not met") : commands[index].arguments[0] == "/bin/true" ? "–" : ratio
                )
            }
        }
        return "### A whole process, run \(runs) times, the commands taking turns\n\n" + table(header, rows)
    }

    private func quantile(_ sorted: [Double], _ fraction: Double) -> Double {
        sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1))]
    }

    // MARK: 3. Memory

    func memory(_ work: WorkDirectory) throws -> String {
        let daemon = try BenchDaemon(binary: binDirectory + "/authgated", work: work, name: "rss", providers: ["mock.json": Self.mockProvider])
        usleep(500_000)
        let idle = daemon.residentKiB
        var rows = [["idle (mock provider loaded, nobody signed in)", "0", mebibytes(idle.total), mebibytes(idle.anonymous), "–", "–"]]
        var signedIn = 0
        for target in sessions.sorted() {
            try signIn(daemon, provider: "mock", from: signedIn, to: target)
            signedIn = target
            usleep(500_000)
            let rss = daemon.residentKiB
            // docs/BENCHMARKS.md's goals: one sign-in in 20 MiB, 10,000 in 40, 100,000 in 100.
            let goal = [1: 20, 10_000: 40, 100_000: 100][target].map { rss.total <= $0 * 1024 ? "**met** (≤ \($0) MiB)" : "not met (≤ \($0) MiB)" }
            rows.append([
                "signed in", "\(target)", mebibytes(rss.total), mebibytes(rss.anonymous),
                String(format: "%.0f", Double((rss.total - idle.total) * 1024) / Double(target)), goal ?? "–",
            ])
        }
        daemon.stop()
        return "### Daemon memory\n\n"
            + table(["state", "sessions", "VmRSS MiB", "of it anonymous (RssAnon) MiB", "bytes per session over idle", "target"], rows)
            + "\n" + (try executableSize(work))
    }

    /// The executable as the package installs it (stripped): every program in one file.
    func executableSize(_ work: WorkDirectory) throws -> String {
        let stripped = work.path + "/authgate.stripped"
        let strip = try Process.run(URL(fileURLWithPath: "/usr/bin/strip"), arguments: ["-o", stripped, binDirectory + "/authgate"])
        strip.waitUntilExit()
        guard strip.terminationStatus == 0 else { return "The executable's size: strip failed.\n" }
        let bytes = (try FileManager.default.attributesOfItem(atPath: stripped)[.size] as? Int) ?? 0
        let mebibytes = Double(bytes) / 1_048_576
        return "The executable, stripped as the package installs it (authgate; authgated and the helpers are links): "
            + String(format: "%.1f MiB (%d bytes)", mebibytes, bytes)
            + (mebibytes <= 25 ? ", **met** (≤ 25 MiB)\n" : ", not met (≤ 25 MiB; docs/BENCHMARKS.md, \"One executable\", says what it holds)\n")
    }

    /// Signs in sessions `s<from>` … `s<to - 1>` of the demo user, from `workers` connections at once.
    func signIn(_ daemon: BenchDaemon, provider: String, from: Int, to: Int, workers: Int = 8) throws {
        let failures = Mutex(0)
        let done = DispatchGroup()
        let client = daemon.client
        for worker in 0..<workers {
            done.enter()
            Thread {
                defer { done.leave() }
                for index in stride(from: from + worker, to: to, by: workers) {
                    let params = LoginParams(provider: provider, grant: nil, username: "demo", password: Secret("demo-password-1"), session: "s\(index)")
                    if (try? client.callBlocking(.login, params, as: LoginResult.self)) == nil { failures.withLock { $0 += 1 } }
                }
            }.start()
        }
        done.wait()
        let failed = failures.withLock { $0 }
        guard failed == 0 else { throw BenchError("\(failed) sign-ins failed") }
    }

    func mebibytes(_ kib: Int) -> String { String(format: "%.1f", Double(kib) / 1024) }

    // MARK: 4. Start-up with 50 providers, one slow

    func startUp(_ work: WorkDirectory, python: String) throws -> String {
        let fast = try FaultyProvider(python: python, repository: repository, work: work, name: "fast", mode: "ok")
        let slow = try FaultyProvider(python: python, repository: repository, work: work, name: "slow", mode: "slow_discovery", delay: 2)
        func provider(_ server: FaultyProvider) -> String {
            #"{"type":"oidc","issuer":"\#(server.issuer)","client_id":"c","grants":["password"],"scopes":["openid"],"tls":{"ca_file":"\#(server.caFile)"}}"#
        }
        var providers: [String: String] = [:]
        for index in 1...50 {
            providers["p\(index).json"] = provider(index == 1 ? slow : fast)
        }
        let notify = try NotifySocket(path: work.path + "/notify")
        let began = DispatchTime.now().uptimeNanoseconds
        let daemon = try BenchDaemon(
            binary: binDirectory + "/authgated",
            work: work,
            name: "startup",
            providers: providers,
            environment: ["NOTIFY_SOCKET": notify.path],
            waitUntilServing: false
        )
        notify.wait(for: "READY=1")
        let ready = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        var validated = 0.0
        while validated == 0 {
            let providers = try daemon.client.callBlocking(.providersList, EmptyResult(), as: [ProviderInfo].self)
            if providers.filter({ $0.status == .ready }).count == 50 {
                validated = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
            } else {
                usleep(10_000)
            }
        }
        daemon.stop()
        return "### Start-up with 50 `oidc` providers, one answering discovery after 2 s\n\n"
            + table(
                ["milestone", "seconds after exec"],
                [
                    ["`READY=1` (socket serving)", String(format: "%.3f", ready)],
                    ["all 50 validated (discovery + JWKS over TLS)", String(format: "%.3f", validated)],
                ]
            )
    }

    // MARK: Output

    func table(_ header: [String], _ rows: [[String]]) -> String {
        var lines = ["| " + header.joined(separator: " | ") + " |", "|" + header.map { _ in " --- |" }.joined()]
        lines += rows.map { "| " + $0.joined(separator: " | ") + " |" }
        return lines.joined(separator: "\n") + "\n"
    }
}
