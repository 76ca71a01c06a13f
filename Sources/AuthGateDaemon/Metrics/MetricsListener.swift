import AuthGateCore
import AuthGateServer
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// `--metrics-listen ADDRESS:PORT`: where the metrics endpoint listens. Loopback unless the
/// admin names another address.
public struct MetricsAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    /// `PORT`, `HOST:PORT` or `[IPv6]:PORT`; `nil` when it is none of them.
    public init?(_ text: String) {
        var host = "127.0.0.1"
        var portText = Substring(text)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            guard !host.isEmpty, !host.contains(":") else { return nil }
        }
        guard let port = Int(portText), (1...65_535).contains(port),
            host.unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit || ".:-abcdefghijklmnopqrstuvwxyz".unicodeScalars.contains($0) })
        else {
            return nil
        }
        self.host = host
        self.port = port
    }

    public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Serves `GET /metrics` (the exposition), `GET /healthz` (the process answers) and
/// `GET /readyz` (the socket serves and every provider has settled) over NIO's HTTP/1 server.
///
/// One request per connection (`Connection: close`), whose head must arrive within
/// ``requestTimeout``, at most ``maximumConnections`` at once and ``maximumConnectionsPerPeer``
/// from one address: a scraper needs no more, and anyone who can reach the port gets no more;
/// a newcomer to a full table displaces the oldest connection that has sent no request yet
/// (``MetricsPlaces``).
/// Every connection's task belongs to the listener's task group, which the graceful shutdown
/// ends.
///
/// Anyone who can reach the port reads it, so by default it shows only the families without a
/// `provider` label (``MetricsExposition/withoutProviderLabels(_:)``); the admin-only `metrics`
/// RPC shows everything, and `--metrics-with-providers` puts the provider labels here too.
///
/// A port it cannot bind (another local user may hold it first) never stops the token service:
/// the listener logs it once, shows it in `daemon.info` (``MetricsListenerStatus``) and tries
/// again in the background. A socket systemd passes under the name `metrics`
/// (`authgated-metrics.socket`) cannot be taken first.
struct MetricsListener: Service, CustomStringConvertible {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    static let maximumConnections = 16
    static let maximumConnectionsPerPeer = 4
    static let requestTimeout: TimeAmount = .seconds(2)
    /// The longest wait between two tries to bind.
    static let maximumRetryDelay: Duration = .seconds(30)

    /// Where to listen; `nil` with an ``inheritedDescriptor``.
    let address: MetricsAddress?
    /// A listening socket systemd passed (`FileDescriptorName=metrics`).
    var inheritedDescriptor: Int32?
    let exposition: MetricsExposition
    /// Whether provider-labelled families are served here too (`--metrics-with-providers`).
    var withProviders = false
    var status = MetricsListenerStatus()
    let logger: Logger

    var description: String { "MetricsListener(\(where_))" }
    private var where_: String { address?.description ?? "the socket systemd passed" }

    func run() async throws {
        let accepted = AcceptedConnections<HTTPServerRequestPart, HTTPServerResponsePart>()
        var server: NIOAsyncChannel<Connection, Never>?
        var delay: Duration = .seconds(1)
        var attempts = 0
        while server == nil {
            do {
                server = try await bind(accepted)
            } catch {
                attempts += 1
                status.record(address: where_, serving: false, problem: "\(error)")
                if attempts == 1 {
                    logger.error(
                        "cannot serve metrics on \(where_): \(error); tokens are served all the same, and the metrics listener tries again in the background"
                    )
                }
                let wait = delay
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                delay = min(delay * 2, Self.maximumRetryDelay)
            }
        }
        guard let server else { return }
        status.record(address: where_, serving: true, problem: nil)
        if let address, !address.isLoopback {
            logger.warning(
                "metrics are served on \(address), beyond this host: anyone who reaches it sees the daemon's counts; put a firewall or a proxy in front"
            )
        }
        logger.notice("serving metrics", metadata: ["metrics.address": "\(where_)", "metrics.bind_attempts": "\(attempts + 1)"])
        let places = OpenPlaces(MetricsPlaces(maximum: Self.maximumConnections, maximumPerPeer: Self.maximumConnectionsPerPeer))
        await withGracefulShutdownHandler {
            await accepted.serveAll(from: server) { connection in
                let peer = connection.channel.remoteAddress?.ipAddress ?? "-"
                guard let id = places.admit(peer: peer, channel: connection.channel) else { return nil }
                return { places.leave(id) }
            } serve: { connection in
                await serve(connection) { places.headReceived(ObjectIdentifier(connection.channel)) }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }

    private func bind(_ accepted: AcceptedConnections<HTTPServerRequestPart, HTTPServerResponsePart>) async throws -> NIOAsyncChannel<Connection, Never> {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer = { @Sendable (channel: any Channel) in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                return try accepted.wrap(channel)
            }
        }
        if let inheritedDescriptor {
            return try await bootstrap.bind(inheritedDescriptor, childChannelInitializer: initializer)
        }
        guard let address else { throw SocketSetupError(description: "no address to serve metrics on") }
        return try await bootstrap.bind(host: address.host, port: address.port, childChannelInitializer: initializer)
    }

    private func serve(_ connection: Connection, headReceived: @escaping @Sendable () -> Void) async {
        try? await OneRequestHTTP.serve(connection, timeout: Self.requestTimeout, headReceived: headReceived) { request, outbound in
            let (status, contentType, body) = await answer(request)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Content-Length", value: "\(body.utf8.count)")
            headers.add(name: "Cache-Control", value: "no-store")
            headers.add(name: "Connection", value: "close")
            try await outbound.write(contentsOf: [
                .head(HTTPResponseHead(version: request.version, status: status, headers: headers)),
                .body(.byteBuffer(ByteBuffer(string: request.method == .HEAD ? "" : body))), .end(nil),
            ])
        }
    }

    private func answer(_ request: HTTPRequestHead) async -> (HTTPResponseStatus, String, String) {
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard request.method == .GET || request.method == .HEAD else {
            return (.methodNotAllowed, "text/plain; charset=utf-8", "Only GET and HEAD.\n")
        }
        switch path {
        case "/metrics":
            let text = await exposition.text()
            return (.ok, MetricsExposition.contentType, withProviders ? text : MetricsExposition.withoutProviderLabels(text))
        case "/healthz":
            return (.ok, "text/plain; charset=utf-8", "ok\n")
        case "/readyz":
            return await exposition.isReady()
                ? (.ok, "text/plain; charset=utf-8", "ready\n")
                : (.serviceUnavailable, "text/plain; charset=utf-8", "not ready: the socket does not serve yet, or a provider is still being checked\n")
        default:
            return (.notFound, "text/plain; charset=utf-8", "Not found: /metrics, /healthz and /readyz are served here.\n")
        }
    }
}

/// The metrics listener's ``MetricsPlaces`` and the channels holding them, shared by its
/// accept loop and connection tasks; closes the connection a newcomer displaces.
private final class OpenPlaces: Sendable {
    private struct State {
        var places: MetricsPlaces
        var channels: [Int: any Channel] = [:]
        var ids: [ObjectIdentifier: Int] = [:]
    }

    private let state: Mutex<State>

    init(_ places: MetricsPlaces) {
        state = Mutex(State(places: places))
    }

    /// The connection's place, or `nil` to close it at once.
    func admit(peer: String, channel: any Channel) -> Int? {
        let (id, displaced): (Int?, (any Channel)?) = state.withLock { state in
            guard case .admitted(let id, let displacing) = state.places.admit(peer: peer) else { return (nil, nil) }
            state.channels[id] = channel
            state.ids[ObjectIdentifier(channel)] = id
            guard let displacing, let old = state.channels.removeValue(forKey: displacing) else { return (id, nil) }
            state.ids[ObjectIdentifier(old)] = nil
            return (id, old)
        }
        displaced?.close(promise: nil)
        return id
    }

    func headReceived(_ channel: ObjectIdentifier) {
        state.withLock { state in
            if let id = state.ids[channel] { state.places.headReceived(id) }
        }
    }

    func leave(_ id: Int) {
        state.withLock { state in
            state.places.leave(id)
            if let channel = state.channels.removeValue(forKey: id) { state.ids[ObjectIdentifier(channel)] = nil }
        }
    }
}

final class MetricsListenerStatus: Sendable {
    struct State: Sendable {
        var address: String
        var serving: Bool
        var problem: String?
    }

    private let state = Mutex<State?>(nil)

    func record(address: String, serving: Bool, problem: String?) {
        state.withLock { $0 = State(address: address, serving: serving, problem: problem) }
    }

    /// `nil` until the listener first tried.
    var current: State? { state.withLock { $0 } }
}
