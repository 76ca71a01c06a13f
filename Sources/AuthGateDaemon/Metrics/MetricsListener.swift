import AuthGateCore
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
              host.unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit || ".:-abcdefghijklmnopqrstuvwxyz".unicodeScalars.contains($0) }) else {
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
/// ``requestTimeout``, at most ``maximumConnections`` at once: a scraper needs no more, and
/// anyone who can reach the port gets no more. Every connection's task belongs to the
/// listener's task group, which the graceful shutdown ends.
struct MetricsListener: Service, CustomStringConvertible {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    static let maximumConnections = 16
    static let requestTimeout: TimeAmount = .seconds(5)

    let address: MetricsAddress
    let exposition: MetricsExposition
    let logger: Logger

    var description: String { "MetricsListener(\(address))" }

    func run() async throws {
        let accepted = AcceptedConnections<HTTPServerRequestPart, HTTPServerResponsePart>()
        let server: NIOAsyncChannel<Connection, Never>
        do {
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: address.host, port: address.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        return try accepted.wrap(channel)
                    }
                }
        } catch {
            logger.critical("cannot serve metrics on \(address): \(error)")
            throw error
        }
        if !address.isLoopback {
            logger.warning("metrics are served on \(address), beyond this host: anyone who reaches it sees provider names and counts; put a firewall or a proxy in front")
        }
        logger.notice("serving metrics", metadata: ["metrics.address": "\(address)"])
        let open = OpenCount()
        await withGracefulShutdownHandler {
            do {
                try await withThrowingDiscardingTaskGroup { group in
                    try await server.executeThenClose { inbound in
                        for try await connection in inbound {
                            accepted.take(connection)
                            guard open.value.add(1, ordering: .relaxed).newValue <= Self.maximumConnections else {
                                open.value.subtract(1, ordering: .relaxed)
                                group.addTask { try? await connection.executeThenClose { _, _ in } }
                                continue
                            }
                            group.addTask {
                                defer { open.value.subtract(1, ordering: .relaxed) }
                                await serve(connection)
                            }
                        }
                    }
                    group.cancelAll()
                }
            } catch {
                // The listener closed under us: nothing more to serve.
            }
            await accepted.drain()
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }

    private func serve(_ connection: Connection) async {
        try? await OneRequestHTTP.serve(connection, timeout: Self.requestTimeout) { request, outbound in
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
            return (.ok, MetricsExposition.contentType, await exposition.text())
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

/// The metrics listener's open connections, shared by its connection tasks.
private final class OpenCount: Sendable {
    let value = Atomic<Int>(0)
}
