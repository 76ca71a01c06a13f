import Logging
import NIOCore
import Synchronization

/// Refused connections, logged as one line an interval instead of one each: a client opening
/// sockets in a loop must not flood the journal (and meet its rate limit, which would drop
/// other lines too). The first refusal of a quiet spell is logged at once; the ones that follow
/// within ``interval`` are summed up in one line when it ends.
final class ConnectionRefusals: Sendable {
    static let interval: TimeAmount = .seconds(10)

    private struct Window {
        var first = true
        var inAll = 0
        var ofOneUser = 0
        var byUID: [UInt32: Int] = [:]
    }

    private let window = Mutex<Window?>(nil)
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func record(_ admission: OpenConnections.Admission, uid: UInt32, on eventLoop: any EventLoop) {
        let opened = window.withLock { window -> Bool in
            let opened = window == nil
            if opened { window = Window() }
            if !opened { window?.first = false }
            if admission == .tooManyOfOneUser { window?.ofOneUser += 1 } else { window?.inAll += 1 }
            window?.byUID[uid, default: 0] += 1
            return opened
        }
        guard opened else { return }
        logger.warning("connection refused: too many connections", metadata: [
            "peer.uid": "\(uid)", "connections.refused_because": "\(admission == .tooManyOfOneUser ? "per-user share" : "limit")",
        ])
        eventLoop.scheduleTask(in: Self.interval) { self.summarize() }
    }

    private func summarize() {
        guard let ended = window.withLock({ window -> Window? in
            defer { window = nil }
            return window
        }), !ended.first else { return }
        let total = ended.inAll + ended.ofOneUser
        let top = ended.byUID.sorted { $0.value > $1.value }.prefix(3).map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        logger.warning("connections refused in the last \(Self.interval.nanoseconds / 1_000_000_000) s", metadata: [
            "connections.refused": "\(total)", "connections.refused.limit": "\(ended.inAll)",
            "connections.refused.per_user_share": "\(ended.ofOneUser)", "connections.refused.top_uids": "\(top)",
        ])
    }
}
