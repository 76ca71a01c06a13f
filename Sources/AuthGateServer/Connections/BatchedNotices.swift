import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Events one client can cause by the hundred — refused connections, connections closed by a
/// deadline — logged as one line an interval instead of one each: a client opening sockets in
/// a loop must not flood the journal (and meet its rate limit, which would drop other lines
/// too). The first event of each cause in a quiet spell is logged at once; the ones of that
/// cause that follow within ``interval`` are summed up in one line when it ends.
final class BatchedNotices: Sendable {
    static let interval: TimeAmount = .seconds(10)

    private struct Window {
        var count = 0
        var byUID: [UInt32: Int] = [:]
    }

    private let windows = Mutex<[String: Window]>([:])
    private let logger: Logger
    private let level: Logger.Level
    /// What the summary line counts, e.g. "connections refused".
    private let counted: String
    /// Its metadata key, e.g. "connections.refused".
    private let key: String

    init(logger: Logger, level: Logger.Level, counting counted: String, key: String) {
        self.logger = logger
        self.level = level
        self.counted = counted
        self.key = key
    }

    /// Refused connections (`warning`).
    static func refusals(logger: Logger) -> BatchedNotices {
        BatchedNotices(logger: logger, level: .warning, counting: "connections refused", key: "connections.refused")
    }

    /// Connections closed by a deadline (`notice`).
    static func timeouts(logger: Logger) -> BatchedNotices {
        BatchedNotices(logger: logger, level: .notice, counting: "connections closed by a deadline", key: "connections.timed_out")
    }

    /// Connections closed for a request line over the limit (`notice`).
    static func oversizedLines(logger: Logger) -> BatchedNotices {
        BatchedNotices(logger: logger, level: .notice, counting: "connections closed for a request line too long", key: "connections.line_too_long")
    }

    /// One event: `message` is logged when it opens a spell of its `cause`, else counted.
    /// - Parameter eventLoop: Where the summary is scheduled; any of NIO's when `nil`.
    func record(
        _ cause: String,
        message: @autoclosure () -> String,
        uid: UInt32,
        metadata: Logger.Metadata = [:],
        on eventLoop: (any EventLoop)? = nil
    ) {
        let opened = windows.withLock { windows -> Bool in
            let opened = windows[cause] == nil
            windows[cause, default: Window()].count += opened ? 0 : 1
            if !opened { windows[cause]?.byUID[uid, default: 0] += 1 }
            return opened
        }
        guard opened else { return }
        logger.log(level: level, "\(message())", metadata: metadata.merging(["peer.uid": "\(uid)", "\(key).cause": "\(cause)"]) { mine, _ in mine })
        (eventLoop ?? MultiThreadedEventLoopGroup.singleton.next()).scheduleTask(in: Self.interval) { self.summarize(cause) }
    }

    private func summarize(_ cause: String) {
        guard let ended = windows.withLock({ $0.removeValue(forKey: cause) }), ended.count > 0 else { return }
        let top = ended.byUID.sorted { $0.value > $1.value }.prefix(3).map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        logger.log(
            level: level,
            "\(ended.count) more \(counted) in the last \(Self.interval.nanoseconds / 1_000_000_000) s: \(cause)",
            metadata: [
                "\(key)": "\(ended.count)", "\(key).cause": "\(cause)", "\(key).top_uids": "\(top)",
            ]
        )
    }
}
