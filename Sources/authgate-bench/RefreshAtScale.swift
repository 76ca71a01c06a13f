import AuthGateClient
import AuthGateCore
import AuthGateRPC
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// 5. Background refresh in real time: many sessions nobody touches, sampled with `status`
/// once a second; `daemon.info` tells how many refreshes started and how late.
extension AuthGateBench {
    struct RefreshLoad {
        var name: String
        /// Provider file name (without `.json`) → (provider JSON, sessions to sign in).
        var providers: [(id: String, json: String, sessions: Int)]
        var seconds: Int
    }

    static func refreshMock(lifetime: Int, latencyMilliseconds: Int = 0) -> String {
        #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "latency_ms": [\#(latencyMilliseconds), \#(latencyMilliseconds)], "access_token_lifetime_seconds": \#(lifetime), "refresh": {"before_expiry_seconds": 3}}"#
    }

    func refreshAtScale(_ work: WorkDirectory) throws -> String {
        let scale = refreshScale
        let loads = [
            RefreshLoad(
                name: "2,000 sessions, 10 s tokens",
                providers: [("mock", Self.refreshMock(lifetime: 10), 2_000)],
                seconds: Int(120 * scale)
            ),
            RefreshLoad(
                name: "10,000 sessions, 60 s tokens",
                providers: [("mock", Self.refreshMock(lifetime: 60), 10_000)],
                seconds: Int(300 * scale)
            ),
            RefreshLoad(
                name: "1,000 sessions of 10 s tokens at a 500 ms provider, 200 at another",
                providers: [
                    ("slow", Self.refreshMock(lifetime: 10, latencyMilliseconds: 500), 1_000),
                    ("fast", Self.refreshMock(lifetime: 10), 200),
                ],
                seconds: Int(60 * scale)
            ),
        ]
        var rows: [[String]] = []
        for (index, load) in loads.enumerated() {
            rows += try measure(load, work: work, name: "refresh\(index)")
        }
        return "### Background refresh in real time (nobody calls; `status` sampled once a second)\n\n"
            + table(
                [
                    "load", "provider", "samples expired", "refreshes/s mean", "max/mean", "lateness p50 / p99 / max s",
                    "RSS first → last MiB", "backlog warnings",
                ],
                rows
            )
    }

    private func measure(_ load: RefreshLoad, work: WorkDirectory, name: String) throws -> [[String]] {
        let log = work.path + "/\(name).log"
        let daemon = try BenchDaemon(
            binary: binDirectory + "/authgated",
            work: work,
            name: name,
            providers: Dictionary(uniqueKeysWithValues: load.providers.map { ($0.id + ".json", $0.json) }),
            logFile: log
        )
        defer { daemon.stop() }
        for provider in load.providers {
            try signIn(daemon, provider: provider.id, from: 0, to: provider.sessions, workers: 64)
        }
        let client = daemon.client
        var samples: [String: Int] = [:]
        var expired: [String: Int] = [:]
        var started: [Int] = []
        var rss: [Int] = []
        var last: RefreshStatistics?
        let began = Date()
        for second in 0...load.seconds {
            let wake = began.addingTimeInterval(Double(second))
            if wake > Date() { usleep(useconds_t(wake.timeIntervalSinceNow * 1_000_000)) }
            let status = try client.callBlocking(.status, StatusParams(), as: [SessionStatus].self)
            for session in status {
                samples[session.provider, default: 0] += 1
                if session.state == .expired || session.state == .loginRequired { expired[session.provider, default: 0] += 1 }
            }
            let info = try client.callBlocking(.daemonInfo, EmptyResult(), as: DaemonInfo.self)
            last = info.refresh
            started.append(info.refresh?.started ?? 0)
            if second % 10 == 0 { rss.append(daemon.residentKiB.total) }
        }
        // Refreshes started per second; the first 20 s (or a quarter) are the sign-in burst settling.
        let perSecond = zip(started.dropFirst(), started).map { $0 - $1 }.dropFirst(min(20, load.seconds / 4))
        let mean = Double(perSecond.reduce(0, +)) / Double(max(1, perSecond.count))
        let maximum = Double(perSecond.max() ?? 0)
        let warnings = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").components(separatedBy: "refreshes fall behind").count - 1
        let lateness = [last?.latenessP50Seconds, last?.latenessP99Seconds, last?.latenessMaxSeconds]
            .map { $0.map { String(format: "%.3f", $0) } ?? "–" }.joined(separator: " / ")
        return load.providers.map { provider in
            [
                load.name + " (\(load.seconds) s)", provider.id,
                "\(expired[provider.id, default: 0]) of \(samples[provider.id, default: 0])",
                String(format: "%.0f", mean), String(format: "%.2f", mean > 0 ? maximum / mean : 0), lateness,
                String(format: "%.1f → %.1f", Double(rss.first ?? 0) / 1024, Double(rss.last ?? 0) / 1024), "\(warnings)",
            ]
        }
    }
}
