import AuthGateClient
import AuthGateCore
import AuthGateRPC
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A fleet's rollout against a provider that throttles: `--fleet-daemons` daemons (separate
/// processes, each with its own state and socket) started within a second against one token
/// endpoint on loopback (Tests/idp/throttled.py) that answers 429 with `Retry-After: 1` beyond
/// `--fleet-rate` requests a second, each daemon with a service session signed in on first use
/// and a caller that asks for its token every half second until it has one, as a careless script
/// does. The tokens last 80 s, so their re-acquisitions (20–40 s after each arrived) make a
/// second round of their own, after the first has ended.
extension AuthGateBench {
    static let fleetLifetime = 80
    /// Where the first round ends and the second begins, in seconds since the fleet started:
    /// the earliest re-acquisition comes a quarter of the lifetime after the first token.
    static let fleetRoundSplit = 20

    func fleet(_ work: WorkDirectory, python: String) throws -> String {
        let count = fleetDaemons
        let rate = fleetRate
        let provider = try FaultyProvider(
            python: python,
            repository: repository,
            work: work,
            name: "throttled",
            script: "throttled.py",
            arguments: ["--rate", "\(rate)", "--expires-in", "\(Self.fleetLifetime)", "--retry-after", "1"]
        )
        try work.write("fleet.secret", "fleet-secret\n")
        chmod(work.path + "/fleet.secret", 0o600)
        // As a fleet's operator would set it (docs/CONFIGURATION.md): two requests a daemon, its
        // check and its first sign-in, spread so that they average 80 % of the provider's rate.
        let spread = fleetSpread ?? Int((2.5 * Double(count) / Double(rate)).rounded(.up))
        let service = #"""
            {"type": "oauth2", "endpoints": {"token": "\#(provider.issuer)/token"}, "client_id": "fleet",
             "client_secret_file": "\#(work.path)/fleet.secret", "grants": ["client_credentials"], "tls": {"ca_file": "\#(provider.caFile)"},
             "refresh": {"first_use_spread_seconds": \#(spread)}}
            """#

        // Each daemon is spawned (posix_spawn, not Foundation's Process: ~30 ms a start here) as a
        // shell waiting at one shared pipe, and all are released together by closing it: spawning
        // 200 processes on 2 cores takes seconds, which would spread the fleet's start by itself.
        var daemons: [FleetDaemon] = []
        defer { for daemon in daemons { daemon.stop() } }
        for index in 0..<count {
            let directory = work.path + "/fleet\(index).d"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(service.utf8).write(to: URL(fileURLWithPath: directory + "/svc.json"))
        }
        var gate: [Int32] = [-1, -1]
        guard pipe(&gate) == 0 else { throw BenchError("pipe: \(String(cString: strerror(errno)))") }
        // Neither end is inherited as such: the children get the read end as their stdin only.
        for end in gate { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        defer { if gate[1] >= 0 { close(gate[1]) } }
        for index in 0..<count {
            daemons.append(
                try FleetDaemon(
                    binary: binDirectory + "/authgated",
                    arguments: [
                        "--user", "--providers", work.path + "/fleet\(index).d", "--socket", work.path + "/fleet\(index).sock",
                        "--state-dir", work.path + "/fleet\(index)-state", "--log-level", "error",
                    ],
                    socketPath: work.path + "/fleet\(index).sock",
                    gate: gate[0]
                )
            )
        }
        close(gate[0])
        let began = DispatchTime.now().uptimeNanoseconds
        @Sendable func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9 }
        close(gate[1])
        gate[1] = -1
        // Started: every shell has become the daemon (its /proc/PID/exe is the executable).
        let executable = URL(fileURLWithPath: binDirectory + "/authgated").resolvingSymlinksInPath().path
        var waiting = daemons
        while !waiting.isEmpty && elapsed() < 30 {
            waiting.removeAll { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\($0.pid)/exe")) == executable }
            if !waiting.isEmpty { usleep(1_000) }
        }
        let startedWithin = elapsed()

        // One caller per daemon, on a thread of its own.
        let served = Mutex<[Double?]>(Array(repeating: nil, count: count))
        let reasons = Mutex<[String: Int]>([:])
        var callers: [Thread] = []
        for (index, daemon) in daemons.enumerated() {
            let client = AuthGateClient(socketPath: daemon.socketPath)
            let caller = Thread {
                let deadline = elapsed() + 60
                while elapsed() < deadline {
                    do throws(RPCClientError) {
                        _ = try client.callBlocking(.token, TokenParams(provider: "svc"), as: TokenResult.self)
                        served.withLock { $0[index] = elapsed() }
                        return
                    } catch .remote(let refusal) {
                        reasons.withLock { $0[refusal.reason.rawValue, default: 0] += 1 }
                    } catch .protocolError {
                        reasons.withLock { $0["unreadable answer", default: 0] += 1 }
                    } catch {
                        // Not listening yet.
                    }
                    usleep(500_000)
                }
            }
            caller.start()
            callers.append(caller)
        }
        while served.withLock({ $0.contains(nil) }) && elapsed() < 60 { usleep(100_000) }
        let times = served.withLock { $0 }.compactMap { $0 }.sorted()
        // Memory once the first round is over: every daemon holds its session.
        var rss = 0
        var pss = 0
        for daemon in daemons {
            rss += daemon.residentKiB
            pss += Self.proportionalKiB(daemon.pid)
        }
        // Until the second round has ended: the last token's re-acquisition comes at most half
        // its lifetime after it arrived.
        let secondRoundEnds = Double(Self.fleetRoundSplit) + (times.last ?? 0) + Double(Self.fleetLifetime) / 2 + 2
        while elapsed() < secondRoundEnds { usleep(200_000) }
        let stats = try Self.throttledStats(provider)

        let firstThrottled = stats.keys.sorted().first { stats[$0]!.throttled > 0 }
        let firstRound = stats.filter { $0.key < Self.fleetRoundSplit }
        let secondRound = stats.filter { $0.key >= Self.fleetRoundSplit }
        let afterThrottling = firstThrottled.map { first in firstRound.filter { $0.key > first }.map(\.value.asked).max() ?? 0 }
        let secondCounts = Self.activeSpan(secondRound)
        let secondMean = secondCounts.isEmpty ? 0 : Double(secondCounts.reduce(0, +)) / Double(secondCounts.count)
        let secondMax = secondCounts.max() ?? 0
        let secondThrottled = secondRound.values.map(\.throttled).reduce(0, +)
        let limit = Int((Double(count) / Double(rate)).rounded(.up)) * 2 + 10
        let transient: Set<String> = ["rate_limited", "service_unavailable", "network_error", "provider_unavailable"]
        let lasting = reasons.withLock { $0 }.filter { !transient.contains($0.key) }
        func met(_ ok: Bool) -> String { ok ? "**met**" : "not met" }

        let rows: [[String]] = [
            ["daemons started", "\(count) within \(String(format: "%.2f", startedWithin)) s", "within 1 s", met(startedWithin <= 1)],
            [
                "every caller has its token",
                times.count == count
                    ? String(format: "after %.1f s (median %.1f s)", times.last ?? 0, times[times.count / 2]) : "\(count - times.count) never did",
                "within ⌈N/R⌉ × 2 + 10 = \(limit) s", met(times.count == count && (times.last ?? .infinity) <= Double(limit)),
            ],
            [
                "errors callers saw",
                reasons.withLock { $0 }.sorted { $0.key < $1.key }.map { "\($0.key) × \($0.value)" }.joined(separator: ", ").ifEmpty("none"),
                "transient only", met(lasting.isEmpty),
            ],
            [
                "provider requests in the busiest whole second after the first 429's",
                afterThrottling.map { "\($0) (\(String(format: "%.2f", Double($0) / Double(rate))) × R)" } ?? "no 429",
                "≤ 1.2 × R = \(Int(1.2 * Double(rate)))", met((afterThrottling ?? 0) <= Int(1.2 * Double(rate))),
            ],
            [
                "second round (re-acquisitions): busiest second / mean over its seconds",
                String(format: "%d / %.1f (%.2f ×)", secondMax, secondMean, secondMean > 0 ? Double(secondMax) / secondMean : 0),
                "≤ 3 × mean", met(secondMean > 0 && Double(secondMax) <= 3 * secondMean),
            ],
            ["429s in the second round", "\(secondThrottled)", "none", met(secondThrottled == 0)],
            [
                "memory of the \(count) daemons (RSS / PSS)",
                "\(rss / 1024) / \(pss / 1024) MiB, per daemon \(rss / count / 1024) / \(String(format: "%.1f", Double(pss) / Double(count) / 1024)) MiB",
                "–", "–",
            ],
        ]
        let perSecond = stats.keys.sorted().map { second -> String in
            let counts = stats[second]!
            let notes = [counts.throttled > 0 ? "\(counts.throttled) × 429" : nil, counts.probes > 0 ? "\(counts.probes) start-up probes" : nil].compactMap {
                $0
            }
            return "\(second): \(counts.asked)" + (notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))")
        }
        return "### A fleet of \(count) daemons against a provider throttling at \(rate) requests a second\n\n"
            + "The daemons are spawned as shells waiting at one pipe and released together (each then becomes `authgated`); "
            + "`Tests/idp/throttled.py` answers 429 with `Retry-After: 1` beyond \(rate) token requests in a second; each daemon signs "
            + "its service session in on first use, for a caller asking every 0.5 s; tokens last \(Self.fleetLifetime) s. "
            + (spread > 0
                ? "The provider file sets `refresh.first_use_spread_seconds` to \(spread) (2.5 × N ÷ R): each daemon's start-up check and first sign-in are spread at random over its first \(spread) s. "
                : "No `refresh.first_use_spread_seconds`: the daemons' first requests are not spread. ")
            + "PSS shares the binary's pages among the daemons (`/proc/PID/smaps_rollup`).\n\n"
            + table(["figure", "measured", "goal", ""], rows)
            + "\nToken requests per second since the start: " + perSecond.joined(separator: ", ") + "\n"
    }

    /// One of the fleet's daemons, started with posix_spawn (its output to /dev/null) as a shell
    /// that becomes the daemon once `gate`, its standard input, reaches its end.
    final class FleetDaemon {
        let pid: pid_t
        let socketPath: String

        init(binary: String, arguments: [String], socketPath: String, gate: Int32) throws {
            self.socketPath = socketPath
            let argv = (["/bin/sh", "-c", #"read _; exec "$0" "$@""#, binary] + arguments).map { strdup($0) } + [nil]
            defer { for item in argv { free(item) } }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, gate, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var pid: pid_t = 0
            guard posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ) == 0 else { throw BenchError("cannot start \(binary)") }
            self.pid = pid
        }

        var residentKiB: Int {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }

        func stop() {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// The seconds of a round from its first request to its last, zeros within included.
    static func activeSpan(_ round: [Int: (asked: Int, throttled: Int, probes: Int)]) -> [Int] {
        let busy = round.filter { $0.value.asked > 0 }.keys
        guard let first = busy.min(), let last = busy.max() else { return [] }
        return (first...last).map { round[$0]?.asked ?? 0 }
    }

    /// throttled.py's counts per whole second since it started.
    static func throttledStats(_ provider: FaultyProvider) throws -> [Int: (asked: Int, throttled: Int, probes: Int)] {
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sS", "--cacert", provider.caFile, provider.issuer + "/_stats"]
        let output = Pipe()
        curl.standardOutput = output
        try curl.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        curl.waitUntilExit()
        guard let document = try JSONSerialization.jsonObject(with: data) as? [String: Any], let seconds = document["seconds"] as? [String: [Int]] else {
            throw BenchError("throttled.py's /_stats was unreadable")
        }
        var counts: [Int: (asked: Int, throttled: Int, probes: Int)] = [:]
        for (second, triple) in seconds where triple.count == 3 {
            if let second = Int(second) { counts[second] = (triple[0], triple[1], triple[2]) }
        }
        return counts
    }

    /// The proportional set size in KiB (shared pages divided among the processes sharing them).
    static func proportionalKiB(_ pid: Int32) -> Int {
        let rollup = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        let line = rollup.split(separator: "\n").first { $0.hasPrefix("Pss:") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
}

extension String {
    fileprivate func ifEmpty(_ replacement: String) -> String { isEmpty ? replacement : self }
}
