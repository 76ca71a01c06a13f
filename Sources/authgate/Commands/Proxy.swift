import ArgumentParser
import AuthGateClient
import AuthGateProxy
import AuthGateTools
import CLinux
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `authgate proxy`: a local reverse proxy for programs that take only a base URL: every
/// request it is given goes to one upstream with the session's token, and for a DPoP session a
/// fresh proof (AuthGateProxy does the work; this parses, binds and waits for a signal).
struct Proxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve an API on a local address, adding the session's token to every request (runs until stopped).",
        discussion: """
            Run it as the user whose session it uses, e.g. from the authgate-proxy@.service units (systemd/system/, systemd/user/). Every request is sent \
            to --upstream's origin (its path prefix put in front of the request's path) with `Authorization` set to the \
            session's token (or, with --scope, --resource or --audience, one the daemon exchanges or narrows for them and \
            caches), and for a DPoP session a `DPoP` proof of that request signed by the daemon; an incoming \
            Authorization or DPoP header is dropped. Requests for another origin and CONNECT are refused: it is not an \
            open proxy. A protocol upgrade (WebSocket) gets the token too, and after the upstream's 101 the connection \
            relays bytes both ways until either side closes or none moves for --idle-timeout. On a TCP port (loopback only, unless --allow-remote-callers) only \
            connections from your own uid's programs (and --allow-uid's) are served, as the kernel's socket table says; \
            on a Unix socket (mode 0600, 0660 with --group) the peer's uid is checked too. A 401 that refuses the token \
            or asks for a DPoP nonce is retried once when the request has no body or a small one. Its own answers carry \
            an `AuthGate-Reason` field: caller_refused, other_origin, connect_refused, bad_request, \
            too_many_connections, login_required, consent_denied, permission_denied, daemon_unreachable, rate_limited, \
            upstream_unreachable, upstream_timeout, upstream_tls, upstream_failed, or another reason of the daemon's. \
            Prints `listening on ADDRESS` \
            when it serves; stops on SIGTERM or SIGINT.
            """
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var selection: SessionSelection

    @Option(
        help: ArgumentHelp("The API's origin, and a path prefix if any: https://api.example.com[/v1] (plain http only to 127.0.0.1 or ::1).", valueName: "url")
    )
    var upstream: String

    @Option(name: .customLong("scope"), help: ArgumentHelp("Send a token narrowed to these scopes (repeatable; token.exchange).", valueName: "scope"))
    var scopes: [String] = []

    @Option(help: ArgumentHelp("Send a token for this resource server (RFC 8707; token.exchange).", valueName: "uri"))
    var resource: String?

    @Option(help: ArgumentHelp("Send a token exchanged for this audience (RFC 8693; token.exchange).", valueName: "audience"))
    var audience: String?

    @Option(help: ArgumentHelp("Where to listen: HOST:PORT (127.0.0.1:8787, [::1]:8787; port 0 picks one) or unix:PATH.", valueName: "address"))
    var listen: String

    @Option(
        help: ArgumentHelp(
            "Also serve the proxy's counts for Prometheus at GET /metrics here (HOST:PORT or unix:PATH), to the same callers.",
            valueName: "address"
        )
    )
    var metricsListen: String?

    @Option(name: .customLong("allow-uid"), help: ArgumentHelp("Also serve this user's programs (a name or uid; repeatable).", valueName: "user"))
    var allowedUsers: [String] = []

    @Option(help: ArgumentHelp("With unix:PATH: give this group read and write on the socket (mode 0660).", valueName: "group"))
    var group: String?

    @Flag(help: "Allow --listen on an address other machines can reach (their callers cannot be checked).")
    var allowRemoteCallers = false

    @Option(help: ArgumentHelp("CAs to trust for the upstream instead of the system's (PEM).", valueName: "path"))
    var caFile: String?

    @Option(help: "Seconds a token must still be valid when a request is sent.")
    var minValid = 30

    @Option(help: "Client connections served at once; with --allow-uid, one uid holds at most half.")
    var maxConnections = 64

    @Option(help: "Seconds without a byte moving after which a connection or an exchange is given up.")
    var idleTimeout = 120

    @Option(help: "Seconds a request's head may take to arrive, from the connection's start or the previous answer's end.")
    var headerTimeout = 30

    @Option(help: "The log's least level on stderr: debug, info, notice, warning or error.")
    var logLevel = "info"

    func run() throws {
        let options = ProxyOptions(
            provider: selection.provider,
            session: selection.session,
            upstream: upstream,
            scopes: scopes,
            resource: resource,
            audience: audience,
            listen: listen,
            metricsListen: metricsListen,
            allowedUsers: allowedUsers,
            group: group,
            allowsRemoteCallers: allowRemoteCallers,
            caFile: caFile,
            minimumValidity: minValid,
            maximumConnections: maxConnections,
            idleSeconds: idleTimeout,
            headerSeconds: headerTimeout
        )
        let configuration: ProxyConfiguration
        do {
            configuration = try ProxyConfiguration(resolving: options)
        } catch {
            throw ToolFailure("authgate proxy: \(Terminal.safe(error.message)).", status: ToolFailure.usage)
        }
        // Before any thread exists: every thread inherits the blocked signals, which are then
        // read from a descriptor.
        let signals = ag_supervisor_signals()
        guard signals >= 0 else {
            throw ToolFailure("cannot handle signals: \(String(cString: strerror(errno))).", status: ToolFailure.internalError)
        }
        var logger = Logger(label: "authgate.proxy") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        let server: ProxyServer
        do {
            server = try ProxyServer(configuration: configuration, client: AuthGateClient(socketPath: global.socket), logger: logger)
        } catch {
            throw ToolFailure("authgate proxy: \(Terminal.safe(error.message)).", status: ToolFailure.usage)
        }
        server.start()
        // stdout is line-buffered (AuthGate.main): a supervisor reading it sees the line now.
        print("listening on \(server.address)")
        if let metrics = server.metricsAddress { print("metrics on \(metrics)") }
        server.serve(untilStoppedBy: signals)
    }
}
