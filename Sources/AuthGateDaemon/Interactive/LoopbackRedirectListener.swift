import AuthGateCore
import AuthGateOAuth
import AuthGateServer
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A page the loopback listener answers the browser with.
struct RedirectPage: Sendable {
    var status: HTTPResponseStatus
    var title: String
    var message: String

    /// A small self-contained HTML page: no script, no external resource, no referrer.
    var html: String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>authgate: \(Self.escape(title))</title></head>
        <body style="font-family: sans-serif; margin: 3em;"><h1>\(Self.escape(title))</h1><p>\(Self.escape(message))</p></body></html>

        """
    }

    // What the browser shows at the end of a browser sign-in.

    static func signedIn(provider: String) -> RedirectPage {
        RedirectPage(status: .ok, title: "Signed in", message: "Signed in to \(provider) — you can close this tab.")
    }

    static func failed(_ why: String) -> RedirectPage {
        RedirectPage(status: .badRequest, title: "Sign-in failed", message: why)
    }

    /// A redirect whose `state` is not the pending sign-in's.
    static func foreignState(provider: String) -> RedirectPage {
        failed("This request does not belong to the pending sign-in to \(provider) (its state does not match); it was refused.")
    }

    /// A second redirect while the first is being redeemed.
    static let alreadyCompleting = RedirectPage(status: .conflict, title: "Sign-in in progress", message: "This sign-in is already being completed.")

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}

/// The redirect listener of a browser sign-in (RFC 8252 §7.3): plain HTTP on a loopback
/// address, an ephemeral port unless the provider's `redirect_uri` names one.
///
/// It answers GET on the redirect path only (anything else is 404), hands each such request's
/// query to the flow, and closes as soon as the flow has its answer, or when the flow's task
/// is cancelled (expiry, `login.cancel`, shutdown). It exists only while its flow is pending.
///
/// Any local user can connect to a loopback port, and the authorization URL (with its `state`)
/// is on the browser's command line, which every local user can read: so only connections
/// from programs of the sign-in's own user are served (the kernel's socket table says whose
/// the other end is, ``CallerCheck``); another user's are closed before a byte is read, so
/// that it can neither bring a code of its own account nor an error to end the sign-in, nor
/// take the places the browser needs. A connection costs little: one request each
/// (`Connection: close`), whose head must arrive within ``requestTimeout`` of connecting (a
/// browser sends it at once), and at most ``maximumConnections`` open at once (more are closed
/// at once).
final class LoopbackRedirectListener: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    static let maximumConnections = 32
    static let requestTimeout: TimeAmount = .seconds(2)

    /// The URL the provider sends the browser back to, with the bound port.
    let redirectURI: URL
    /// Percent-encoded, as it appears in a request line.
    private let path: String
    private let server: NIOAsyncChannel<Connection, Never>
    private let accepted: AcceptedConnections<HTTPServerRequestPart, HTTPServerResponsePart>
    private let openConnections = Atomic<Int>(0)
    /// Whose programs may bring the redirect: the sign-in's user.
    private let uid: UInt32

    private init(
        redirectURI: URL,
        uid: UInt32,
        path: String,
        server: NIOAsyncChannel<Connection, Never>,
        accepted: AcceptedConnections<HTTPServerRequestPart, HTTPServerResponsePart>
    ) {
        self.redirectURI = redirectURI
        self.uid = uid
        self.path = path
        self.server = server
        self.accepted = accepted
    }

    /// Binds the listener for `configured` (`http://127.0.0.1/callback` when `nil`), for a
    /// sign-in of `uid`, whose programs alone it serves.
    /// - Throws: `service_unavailable` when the address cannot be bound (a fixed port in use).
    static func bind(_ configured: URL?, for uid: UInt32) async throws(AuthGateError) -> LoopbackRedirectListener {
        let base = configured ?? URL(string: "http://127.0.0.1/callback")!
        let host = (base.host ?? "127.0.0.1").trimming("[]")
        // Exactly as configured (a trailing slash kept, escapes kept): the provider compares
        // the redirect_uri character for character.
        let encodedPath = URLComponents(url: base, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? ""
        let path = encodedPath.isEmpty ? "/" : encodedPath
        let server: NIOAsyncChannel<Connection, Never>
        let accepted = AcceptedConnections<HTTPServerRequestPart, HTTPServerResponsePart>()
        do {
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 16)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: base.port ?? 0) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        return try accepted.wrap(channel)
                    }
                }
        } catch {
            throw AuthGateError(
                .serviceUnavailable,
                "The browser sign-in cannot listen on \(host) port \(base.port ?? 0) for the redirect (\(error)); another sign-in may be using it: try again in a moment."
            )
        }
        let port = server.channel.localAddress?.port ?? base.port ?? 0
        let urlHost = host.contains(":") ? "[\(host)]" : host
        guard let redirect = URL(string: "http://\(urlHost):\(port)\(path)") else {
            server.channel.close(promise: nil)
            throw AuthGateError(.validationFailed, "The configured redirect_uri cannot be used: \(base.absoluteString.prefix(200))")
        }
        return LoopbackRedirectListener(redirectURI: redirect, uid: uid, path: path, server: server, accepted: accepted)
    }

    /// Closes the listener; safe to call more than once.
    func close() {
        server.channel.close(promise: nil)
    }

    /// Serves until `handle` returns an outcome (its page is sent first), or until the task
    /// is cancelled. Closes the listener and every connection before it returns.
    /// - Parameters:
    ///   - refused: Told of each connection of another user's program (its uid, when the
    ///     kernel still knew it), closed unread.
    ///   - handle: Given the query of a GET on the redirect path: the page to answer with and,
    ///     when the flow is over, its outcome.
    /// - Returns: The outcome, or `nil` when cancelled.
    func serve<Outcome: Sendable>(
        refused: @escaping @Sendable (UInt32?) -> Void,
        handle: @escaping @Sendable ([String: String]) async -> (RedirectPage, Outcome?)
    ) async -> Outcome? {
        let result = FirstOutcome<Outcome>()
        let server = server
        await withTaskCancellationHandler {
            await accepted.serveAll(from: server) { connection in
                let owner = CallerCheck.tcpPeerUID(of: connection.channel)
                guard owner == self.uid else {
                    refused(owner)
                    return nil
                }
                guard self.openConnections.add(1, ordering: .relaxed).newValue <= Self.maximumConnections else {
                    self.openConnections.subtract(1, ordering: .relaxed)
                    return nil
                }
                return { self.openConnections.subtract(1, ordering: .relaxed) }
            } serve: { connection in
                guard let outcome = await self.serve(connection, handle) else { return }
                if result.keep(outcome) { server.channel.close(promise: nil) }
            }
        } onCancel: {
            server.channel.close(promise: nil)
        }
        return result.value
    }

    /// Answers the requests of one connection until the flow's outcome or the connection's end.
    private func serve<Outcome: Sendable>(
        _ connection: Connection,
        _ handle: @Sendable ([String: String]) async -> (RedirectPage, Outcome?)
    ) async -> Outcome? {
        // The outcome is kept even when writing the page fails: a browser (or curl) that has
        // read the whole page may close the connection before the last write completes, and
        // the flow must still end with the code it redeemed.
        let outcome = FirstOutcome<Outcome>()
        do {
            try await OneRequestHTTP.serve(connection, timeout: Self.requestTimeout) { request, outbound in
                let (page, result) = await self.answer(request, handle)
                if let result { _ = outcome.keep(result) }
                try await Self.write(page, to: outbound)
            }
        } catch {
            // The connection failed or was closed: whatever was redeemed stays redeemed.
        }
        return outcome.value
    }

    private func answer<Outcome: Sendable>(
        _ request: HTTPRequestHead,
        _ handle: @Sendable ([String: String]) async -> (RedirectPage, Outcome?)
    ) async -> (RedirectPage, Outcome?) {
        let parts = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard request.method == .GET, parts.first.map(String.init) == path else {
            return (RedirectPage(status: .notFound, title: "Not found", message: "There is nothing here."), nil)
        }
        guard let query = Self.parseQuery(parts.count > 1 ? String(parts[1]) : "") else {
            // RFC 6749 §3.1: a parameter must not appear twice.
            return (
                RedirectPage(
                    status: .badRequest,
                    title: "Sign-in failed",
                    message: "This request is malformed (a parameter is repeated or badly encoded); it was refused."
                ), nil
            )
        }
        return await handle(query)
    }

    /// `application/x-www-form-urlencoded` pairs; `nil` when a name repeats or decoding fails.
    static func parseQuery(_ query: String) -> [String: String]? {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = FormEncoding.unescape(halves[0]),
                let value = FormEncoding.unescape(halves.count > 1 ? halves[1] : Substring("")),
                result[name] == nil
            else { return nil }
            result[name] = value
        }
        return result
    }

    private static func write(_ page: RedirectPage, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        let body = ByteBuffer(string: page.html)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        // The URL of this page carries the authorization code: no Referer may take it elsewhere.
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        headers.add(name: "Content-Security-Policy", value: "default-src 'none'; style-src 'unsafe-inline'")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "Connection", value: "close")
        try await outbound.write(contentsOf: [
            .head(HTTPResponseHead(version: .http1_1, status: page.status, headers: headers)),
            .body(.byteBuffer(body)), .end(nil),
        ])
    }
}

/// The first outcome delivered by any connection; later ones are dropped.
private final class FirstOutcome<Outcome: Sendable>: Sendable {
    private let stored = Mutex<Outcome?>(nil)

    var value: Outcome? { stored.withLock { $0 } }

    /// Keeps `outcome` if it is the first; true when it was.
    func keep(_ outcome: Outcome) -> Bool {
        stored.withLock { stored in
            if stored != nil { return false }
            stored = outcome
            return true
        }
    }
}
