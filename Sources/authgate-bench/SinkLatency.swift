import AuthGateClient
import AuthGateCore
import AuthGateRPC
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// 6. `authgate sink`: how long after a refresh the file holds the new token. The bench watches
/// the same session itself (`token.watch`): a notification's arrival marks the refresh, and
/// the file is polled every 200 µs for the token it announced.
extension AuthGateBench {
    func sinkLatency(_ work: WorkDirectory) throws -> String {
        let provider =
            #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access_token_lifetime_seconds": 4, "refresh": {"before_expiry_seconds": 1}}"#
        let daemon = try BenchDaemon(binary: binDirectory + "/authgated", work: work, name: "sink", providers: ["mock.json": provider])
        defer { daemon.stop() }
        try daemon.signIn()
        let file = work.path + "/sink-token"
        let sink = Process()
        sink.executableURL = URL(fileURLWithPath: cli ?? binDirectory + "/authgate")
        sink.arguments = ["sink", "mock", "--file", file]
        sink.environment = ["AUTHGATE_SOCKET": daemon.socketPath]
        sink.standardError = FileHandle.nullDevice
        try sink.run()
        defer {
            sink.terminate()
            sink.waitUntilExit()
        }
        // The bench's own watch: token → when its notification arrived.
        let announced = Mutex<[String: UInt64]>([:])
        let watching = DispatchSemaphore(value: 0)
        // A follower (AuthGateClient's), read on the thread it runs on: its first token is the
        // current one, the watch's answer; each one after it is a refresh's notification.
        let follower = TokenFollower(socketPath: daemon.socketPath, params: TokenParams(provider: "mock"))
        let stop = FollowStop()
        defer { stop.stop() }
        let reader = Thread {
            var answered = false
            try? follower.run(stop: stop) { event in
                let now = DispatchTime.now().uptimeNanoseconds
                guard answered else {
                    answered = true
                    watching.signal()
                    return true
                }
                if case .token(let token) = event { announced.withLock { $0[token.accessToken.exposedValue] = now } }
                return true
            }
            if !answered { watching.signal() }
        }
        reader.start()
        watching.wait()
        let refreshes = 15
        var latencies: [Double] = []
        var last = ""
        let deadline = Date().addingTimeInterval(Double(refreshes) * 4 + 10)
        while latencies.count < refreshes, Date() < deadline {
            let content = ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            if !content.isEmpty, content != last {
                let seen = DispatchTime.now().uptimeNanoseconds
                last = content
                if let at = announced.withLock({ $0[content] }) { latencies.append(Double(seen - min(seen, at)) / 1e6) }
            }
            usleep(200)
        }
        latencies.sort()
        guard !latencies.isEmpty else { throw BenchError("the sink never followed a refresh") }
        func quantile(_ fraction: Double) -> String {
            String(format: "%.2f", latencies[min(latencies.count - 1, Int((Double(latencies.count) * fraction).rounded(.up)) - 1)])
        }
        return "### `authgate sink`: refresh → file\n\n"
            + table(
                ["refreshes", "p50 ms", "p99 ms", "max ms"],
                [["\(latencies.count)", quantile(0.5), quantile(0.99), String(format: "%.2f", latencies.last ?? 0)]]
            )
    }
}
