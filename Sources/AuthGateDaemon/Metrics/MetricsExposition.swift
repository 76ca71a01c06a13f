import AuthGateCore
import AuthGateServer
import Prometheus
import Synchronization

/// The metrics as Prometheus's text exposition format (version 0.0.4), for the RPC method
/// `metrics` and `GET /metrics`: first the gauges of what the daemon holds are read from their
/// owners, then the registry and the `process_*` families are written out.
struct MetricsExposition: Sendable {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The exposition without the samples labelled by provider (and the `# HELP`/`# TYPE` lines
    /// of families left with none): what the HTTP listener shows by default, since anyone who
    /// reaches its port reads it, and provider ids and per-provider counts are the admin-only
    /// `metrics` method's to show.
    static func withoutProviderLabels(_ text: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        func family(_ line: Substring) -> Substring {
            line.prefix { $0 != "{" && $0 != " " }
        }
        var kept: [Substring] = []
        var sampled: Set<Substring> = []
        for line in lines where !line.hasPrefix("#") && !line.isEmpty && !line.contains("provider=\"") {
            // A histogram's samples are FAMILY_bucket, _sum and _count.
            let name = family(line)
            sampled.insert(name)
            for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) { sampled.insert(name.dropLast(suffix.count)) }
        }
        for line in lines {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let name = family(line.dropFirst(7))
                if sampled.contains(name) { kept.append(line) }
            } else if !line.contains("provider=\"") {
                kept.append(line)
            }
        }
        return kept.joined(separator: "\n")
    }

    let metrics: DaemonMetrics
    let registry: ProviderRegistry
    let sessions: SessionManager
    let flows: LoginFlowManager
    let connections: OpenConnections
    let readiness: Readiness

    func text() async -> String {
        let providers = await registry.statuses()
        metrics.setGauges(
            DaemonMetrics.Family.providerStatus,
            providers.flatMap { id, status in
                ProviderStatus.allCases.map { ([("provider", id), ("status", $0.rawValue)], $0 == status ? 1 : 0) }
            }
        )
        let gauges = await sessions.metricsSnapshot()
        let known = Set(providers.map(\.id))
        metrics.setGauges(
            DaemonMetrics.Family.sessions,
            known.sorted().flatMap { provider in
                SessionState.allCases.map { state in
                    ([("provider", provider), ("state", state.rawValue)], Double(gauges.states[provider]?[state] ?? 0))
                }
            }
        )
        metrics.setGauges(
            DaemonMetrics.Family.refreshesWaiting,
            known.sorted().map { provider in
                ([("provider", provider)], Double(gauges.waiting[provider] ?? 0))
            }
        )
        metrics.setGauge(DaemonMetrics.Family.refreshesInFlight, Double(gauges.inFlight))
        metrics.setGauge(DaemonMetrics.Family.flowsPending, Double(await flows.pendingCount))
        metrics.setGauge(DaemonMetrics.Family.connectionsOpen, Double(connections.count))
        return metrics.registry.emitToString() + ProcessMetrics.exposition()
    }

    /// `GET /readyz`: the socket serves and no provider is still being checked.
    func isReady() async -> Bool {
        guard readiness.socketServes else { return false }
        return await !registry.statuses().contains { $0.status == .unchecked }
    }
}

/// Whether the RPC socket serves: set by ``RPCServer`` when it listens and when it stops.
final class Readiness: Sendable {
    private let serving = Atomic<Bool>(false)

    var socketServes: Bool { serving.load(ordering: .acquiring) }

    func socketServing(_ value: Bool) { serving.store(value, ordering: .releasing) }
}
