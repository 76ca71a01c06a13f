import AuthGateHTTP

/// Told of each request to a provider, for the metrics (``DaemonMetrics`` observes it:
/// `authgate_provider_requests_total`, `authgate_provider_request_duration_seconds`).
protocol ProviderRequestObserver: Sendable {
    /// One request to a provider: `outcome` is the HTTP status class, or what stopped it.
    func providerRequest(provider: String, endpoint: HTTPRequest.Endpoint, outcome: String, duration: Duration)
}

/// A provider's HTTP transport that times each request and tells its ``ProviderRequestObserver``.
struct MeasuredTransport: HTTPTransport {
    let inner: any HTTPTransport
    let provider: String
    let metrics: any ProviderRequestObserver

    func send(_ request: HTTPRequest, policy: HTTPRequestPolicy) async throws(HTTPTransportError) -> HTTPResponse {
        let start = ContinuousClock.now
        do {
            let response = try await inner.send(request, policy: policy)
            metrics.providerRequest(
                provider: provider,
                endpoint: request.endpoint,
                outcome: Self.outcome(status: response.status),
                duration: .now - start
            )
            return response
        } catch {
            metrics.providerRequest(provider: provider, endpoint: request.endpoint, outcome: Self.outcome(error.kind), duration: .now - start)
            throw error
        }
    }

    /// `2xx`, `3xx`, `4xx`, `5xx` (anything else is `other`): a bounded label.
    static func outcome(status: Int) -> String {
        (100...599).contains(status) ? "\(status / 100)xx" : "other"
    }

    static func outcome(_ kind: HTTPTransportError.Kind) -> String {
        switch kind {
        case .cannotConnect: "cannot_connect"
        case .timedOut: "timed_out"
        case .tls: "tls"
        case .responseTooLarge: "response_too_large"
        case .forbiddenURL: "forbidden_url"
        case .other: "error"
        }
    }
}
