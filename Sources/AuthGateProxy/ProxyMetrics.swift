import NIOCore
import NIOHTTP1
import Synchronization

/// `--metrics-listen`: `GET /metrics` answers the proxy's counts (``ProxyCounts``) in
/// Prometheus' text format; anything else is 404. Its connections are checked as the proxy's
/// are (``CallerCheck``): the counts hold no token, but they tell how an API is used.
final class MetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let core: ProxyCore
    private var path: String?

    init(core: ProxyCore) {
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            path = head.method == .GET ? String(head.uri.prefix { $0 != "?" }) : nil
        case .body:
            break
        case .end:
            let found = path == "/metrics"
            let text = found ? core.counts.withLock { $0 }.exposition : "Not found: the metrics are at /metrics.\n"
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: String(text.utf8.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: found ? .ok : .notFound, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

extension ProxyCounts {
    /// The counts in Prometheus' text format (version 0.0.4), for `--metrics-listen`.
    public var exposition: String {
        var text = """
            # HELP authgate_proxy_requests_total Requests read from clients.
            # TYPE authgate_proxy_requests_total counter
            authgate_proxy_requests_total \(requests)
            # HELP authgate_proxy_upstream_answers_total Upstream answers passed on, by status class.
            # TYPE authgate_proxy_upstream_answers_total counter

            """
        for (index, count) in upstreamAnswers.enumerated() {
            text += "authgate_proxy_upstream_answers_total{class=\"\(index + 1)xx\"} \(count)\n"
        }
        text += """
            # HELP authgate_proxy_retries_total Requests sent once more: with a DPoP nonce, or with a new token after the upstream refused one.
            # TYPE authgate_proxy_retries_total counter
            authgate_proxy_retries_total{cause="nonce"} \(nonceRetries)
            authgate_proxy_retries_total{cause="token"} \(tokenRetries)
            # HELP authgate_proxy_callers_refused_total Connections refused because of their caller's uid.
            # TYPE authgate_proxy_callers_refused_total counter
            authgate_proxy_callers_refused_total \(callersRefused)
            # HELP authgate_proxy_upstream_failures_total Exchanges the upstream gave no answer to.
            # TYPE authgate_proxy_upstream_failures_total counter
            authgate_proxy_upstream_failures_total \(upstreamFailures)
            # HELP authgate_proxy_upgrades_total Protocol upgrades (WebSocket) the upstream accepted: connections that became tunnels.
            # TYPE authgate_proxy_upgrades_total counter
            authgate_proxy_upgrades_total \(upgrades)
            # HELP authgate_proxy_own_answers_total Answers the proxy gave itself, by reason.
            # TYPE authgate_proxy_own_answers_total counter

            """
        for (reason, count) in ownAnswers.sorted(by: { $0.key < $1.key }) {
            text += "authgate_proxy_own_answers_total{reason=\"\(reason)\"} \(count)\n"
        }
        return text
    }
}
