import AuthGateCore
import AuthGateHTTP
import AuthGateRPC
import Prometheus
import Synchronization

/// The daemon's Prometheus metrics, on a registry of its own (swift-prometheus, whose metric
/// types are swift-metrics handlers): what happens is counted here as it happens; what the
/// daemon holds (providers, sessions, connections, flows, the process) is read when the metrics
/// are asked for (``MetricsExposition``).
///
/// Names follow Prometheus's conventions (an `authgate_` prefix, base units, `_total` for
/// counters). Every label value comes from a bounded set: methods, error reasons, grants,
/// endpoints, states, and provider ids (the admin's files); never a user, a uid, a subject or a
/// secret. docs/METRICS.md lists them.
///
/// The families are registered through `PrometheusCollectorRegistry`'s own API rather than
/// swift-metrics' global `MetricsSystem`, because only that API carries help texts (which
/// `promtool check metrics` requires), and because each daemon (and each in-process test) then
/// has a registry of its own.
final class DaemonMetrics: SessionWorkObserver, SignInObserver, CachedAnswerObserver, ProviderRequestObserver {
    let registry = PrometheusCollectorRegistry()

    /// The label of a request that named no method the daemon has (or could not be read).
    static let unknownMethod = "unknown"
    /// The outcome label of everything that went well.
    static let ok = "ok"

    private let cachedTokenAnswers: Counter
    /// The request counter and duration of each method answered from a published token.
    private let cachedRequests: [RPCMethod: (requests: Counter, duration: DurationHistogram)]

    /// Request durations: a cached `token` answer takes tens of microseconds, a sign-in seconds.
    static let requestBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
    ]
    static let providerBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]
    /// How late a background refresh starts against its plan, in seconds.
    static let latenessBuckets: [Double] = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
    static let storeBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
    ]

    init() {
        cachedTokenAnswers = registry.makeCounter(descriptor: Family.cachedAnswers, )
        var cachedRequests: [RPCMethod: (requests: Counter, duration: DurationHistogram)] = [:]
        for method in [RPCMethod.token, .credentialGet] {
            let labels = [("method", method.rawValue)]
            cachedRequests[method] = (
                registry.makeCounter(descriptor: Family.rpcRequests, labels: labels + [("outcome", Self.ok)]),
                registry.makeDurationHistogram(descriptor: Family.rpcDuration, labels: labels, buckets: Self.requestBuckets)
            )
        }
        self.cachedRequests = cachedRequests
        // Counters whose label sets are known up front start at 0, so that rate() sees their first increase.
        for cause in ConnectionRefusal.allCases {
            _ = registry.makeCounter(descriptor: Family.connectionsRefused, labels: [("cause", cause.rawValue)])
        }
        for outcome in [Self.ok, "failed"] {
            _ = registry.makeCounter(descriptor: Family.storeWrites, labels: [("outcome", outcome)])
        }
        _ = registry.makeDurationHistogram(descriptor: Family.storeDuration, buckets: Self.storeBuckets)
        _ = registry.makeValueHistogram(descriptor: Family.refreshLateness, buckets: Self.latenessBuckets)
        registry.makeGauge(descriptor: Family.buildInfo, labels: [("version", AuthGateVersion.current)]).set(1.0)
    }

    // MARK: Recording

    /// A request the dispatcher answered.
    func rpcRequest(method: String, outcome: ErrorReason?, duration: Duration) {
        registry.makeCounter(descriptor: Family.rpcRequests, labels: [("method", method), ("outcome", outcome?.rawValue ?? Self.ok)]).increment()
        registry.makeDurationHistogram(descriptor: Family.rpcDuration, labels: [("method", method)], buckets: Self.requestBuckets).record(duration)
    }

    /// `count` calls of `method` (`token` or `credential.get`) answered from a published token
    /// (``CachedTokenAnswers``), each within `duration`: handles made once, so that the hot path
    /// costs two atomic additions per batch of answers (the front door's) and a histogram
    /// update per answer.
    func cachedAnswers(_ method: RPCMethod, _ count: Int, eachWithin duration: Duration) {
        cachedTokenAnswers.increment(by: Int64(count))
        guard let handles = cachedRequests[method] else { return }
        handles.requests.increment(by: Int64(count))
        for _ in 0..<count { handles.duration.record(duration) }
    }

    /// One request to a provider: `outcome` is the HTTP status class, or what stopped it.
    func providerRequest(provider: String, endpoint: HTTPRequest.Endpoint, outcome: String, duration: Duration) {
        let labels = [("provider", provider), ("endpoint", endpoint.rawValue)]
        registry.makeCounter(descriptor: Family.providerRequests, labels: labels + [("outcome", outcome)]).increment()
        registry.makeDurationHistogram(descriptor: Family.providerDuration, labels: labels, buckets: Self.providerBuckets).record(duration)
    }

    /// A refresh of a session's own token (background or a caller's) has ended.
    func refreshEnded(provider: ProviderID, outcome: ErrorReason?) {
        registry.makeCounter(descriptor: Family.refreshes, labels: [("provider", provider.rawValue), ("outcome", outcome?.rawValue ?? Self.ok)]).increment()
    }

    /// A background refresh started `seconds` after its planned time.
    func refreshStarted(lateBy seconds: Double) {
        registry.makeValueHistogram(descriptor: Family.refreshLateness, buckets: Self.latenessBuckets)
            .record(max(0, seconds))
    }

    /// A sign-in ended (password, client credentials, registration, or an interactive flow).
    func signIn(provider: ProviderID, grant: Grant, outcome: ErrorReason?) {
        registry.makeCounter(
            descriptor: Family.signIns,
            labels: [
                ("provider", provider.rawValue), ("grant", grant.rawValue),
                ("outcome", outcome?.rawValue ?? Self.ok),
            ]
        ).increment()
    }

    /// A service session's sign-in on first use: tried, refused by the per-uid rate limit, or
    /// answered with a refusal remembered (``FirstUseSignIns``).
    func firstUseSignIn(provider: ProviderID, outcome: FirstUseSignIns.Outcome) {
        registry.makeCounter(descriptor: Family.firstUseSignIns, labels: [("provider", provider.rawValue), ("outcome", outcome.rawValue)]).increment()
    }

    /// A connection the server turned away.
    func connectionRefused(_ cause: ConnectionRefusal) {
        registry.makeCounter(descriptor: Family.connectionsRefused, labels: [("cause", cause.rawValue)]).increment()
    }

    /// A write of a uid's sealed sessions file.
    func storeWrite(succeeded: Bool, duration: Duration) {
        registry.makeCounter(descriptor: Family.storeWrites, labels: [("outcome", succeeded ? Self.ok : "failed")]).increment()
        registry.makeDurationHistogram(descriptor: Family.storeDuration, buckets: Self.storeBuckets).record(duration)
    }

    /// Why a connection was refused.
    enum ConnectionRefusal: String, CaseIterable, Sendable {
        /// `--max-connections` are open.
        case limit
        /// Its uid holds its share of them.
        case perUserShare = "per_user_share"
    }

    // MARK: Gauges read when the metrics are asked for

    /// Labelled gauges set at each collection; label sets no longer reported (a provider
    /// removed by a reload) are dropped from the registry.
    private let reported = Mutex<[String: [String: Gauge]]>([:])

    /// Sets the gauge family `name` to exactly `values`: every label set not in it goes.
    func setGauges(_ family: MetricNameDescriptor, _ values: [([(String, String)], Double)]) {
        var kept: [String: Gauge] = [:]
        for (labels, value) in values {
            let gauge = registry.makeGauge(descriptor: family, labels: labels)
            gauge.set(value)
            kept[labels.map { "\($0.0)=\($0.1)" }.joined(separator: ",")] = gauge
        }
        let dropped = reported.withLock { reported -> [Gauge] in
            let previous = reported[family.name] ?? [:]
            reported[family.name] = kept
            return previous.filter { kept[$0.key] == nil }.map(\.value)
        }
        for gauge in dropped { registry.unregisterGauge(gauge) }
    }

    func setGauge(_ family: MetricNameDescriptor, _ value: Double) {
        registry.makeGauge(descriptor: family).set(value)
    }

    /// The families: names by Prometheus's conventions and their help texts, in one place
    /// for the code, the tests and docs/METRICS.md. (Computed: swift-prometheus's descriptor
    /// is not Sendable, so it cannot be a stored static.)
    enum Family {
        static var rpcRequests: MetricNameDescriptor {
            .init(
                metricName: "authgate_rpc_requests",
                unitName: "total",
                helpText: "RPC requests answered, by method and outcome (ok or the error reason)."
            )
        }
        static var rpcDuration: MetricNameDescriptor {
            .init(
                metricName: "authgate_rpc_request_duration",
                unitName: "seconds",
                helpText: "Time from reading an RPC request line to its answer, by method."
            )
        }
        static var cachedAnswers: MetricNameDescriptor {
            .init(
                metricName: "authgate_rpc_cached_answers",
                unitName: "total",
                helpText: "token calls answered from a published token without the dispatcher (also counted in authgate_rpc_requests_total)."
            )
        }
        static var providerStatus: MetricNameDescriptor {
            .init(
                metricName: "authgate_provider_status",
                unitName: "",
                helpText: "1 for the status each provider has now (ready, unchecked, unreachable, invalid), else 0."
            )
        }
        static var providerRequests: MetricNameDescriptor {
            .init(
                metricName: "authgate_provider_requests",
                unitName: "total",
                helpText: "HTTP requests to providers, by provider, endpoint and outcome (status class, or what stopped the request)."
            )
        }
        static var providerDuration: MetricNameDescriptor {
            .init(
                metricName: "authgate_provider_request_duration",
                unitName: "seconds",
                helpText: "Duration of HTTP requests to providers, by provider and endpoint."
            )
        }
        static var sessions: MetricNameDescriptor {
            .init(
                metricName: "authgate_sessions",
                unitName: "",
                helpText: "Sessions held, by provider and state."
            )
        }
        static var refreshes: MetricNameDescriptor {
            .init(
                metricName: "authgate_refreshes",
                unitName: "total",
                helpText: "Refreshes of sessions' own tokens, by provider and outcome (ok or the error reason)."
            )
        }
        static var refreshLateness: MetricNameDescriptor {
            .init(
                metricName: "authgate_refresh_lateness",
                unitName: "seconds",
                helpText: "How long after its planned time a background refresh started."
            )
        }
        static var refreshesInFlight: MetricNameDescriptor {
            .init(
                metricName: "authgate_refreshes_in_flight",
                unitName: "",
                helpText: "Refreshes at providers right now."
            )
        }
        static var refreshesWaiting: MetricNameDescriptor {
            .init(
                metricName: "authgate_refreshes_waiting",
                unitName: "",
                helpText: "Sessions past their planned refresh time waiting for a free slot, by provider."
            )
        }
        static var firstUseSignIns: MetricNameDescriptor {
            .init(
                metricName: "authgate_first_use_sign_ins",
                unitName: "total",
                helpText: "Service sessions' sign-ins on first use, by provider and outcome (attempted, rate_limited, remembered)."
            )
        }
        static var signIns: MetricNameDescriptor {
            .init(
                metricName: "authgate_sign_ins",
                unitName: "total",
                helpText: "Sign-ins, by provider, grant and outcome (ok or the error reason)."
            )
        }
        static var flowsPending: MetricNameDescriptor {
            .init(
                metricName: "authgate_login_flows_pending",
                unitName: "",
                helpText: "Interactive sign-ins (device code, browser) waiting for the user."
            )
        }
        static var connectionsOpen: MetricNameDescriptor {
            .init(
                metricName: "authgate_connections_open",
                unitName: "",
                helpText: "Connections to the RPC socket being served."
            )
        }
        static var connectionsRefused: MetricNameDescriptor {
            .init(
                metricName: "authgate_connections_refused",
                unitName: "total",
                helpText: "Connections to the RPC socket refused, by cause (limit, per_user_share)."
            )
        }
        static var storeWrites: MetricNameDescriptor {
            .init(
                metricName: "authgate_session_store_writes",
                unitName: "total",
                helpText: "Writes of sealed sessions files, by outcome."
            )
        }
        static var storeDuration: MetricNameDescriptor {
            .init(
                metricName: "authgate_session_store_write_duration",
                unitName: "seconds",
                helpText: "Duration of a sealed sessions file write (seal, write, fsync, rename)."
            )
        }
        static var buildInfo: MetricNameDescriptor {
            .init(
                metricName: "authgate_build_info",
                unitName: "",
                helpText: "Always 1; the version label says which authgated runs."
            )
        }
    }
}
