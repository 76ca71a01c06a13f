import AuthGateCore
internal import CCurl
public import FoundationEssentials
import NIOCore
import NIOPosix
import Synchronization

/// One HTTP request whose body and answer stream through libcurl (``StreamedExchanges``), for
/// `authgate proxy`: the request's body is pulled from ``StreamedRequestBody`` as curl sends it,
/// and the answer is pushed to ``StreamedResponseSink`` as it arrives, so a body of any size
/// costs the proxy only the buffers in between.
///
/// The rules of ``CurlTransport`` hold here too (peer and host verification, https only, plain
/// http only to 127.0.0.1/::1 when the policy allows it, no redirects followed, no signals,
/// never `CURLOPT_VERBOSE`), with two differences a proxy needs: the method is any token the
/// client sent, and instead of a total timeout an exchange fails when no byte moves for
/// ``StreamPolicy/idleTimeoutSeconds`` (a download of many minutes is fine, a stalled one is not).
public struct StreamedRequest: Sendable {
    /// The method as the client sent it (`GET`, `PROPFIND`, …).
    public var method: String
    public var url: URL
    /// Header lines as sent; never logged (they carry `Authorization`).
    public var headers: [(name: String, value: String)]
    /// The body's length: `nil` for no body, `-1` for a body of unknown length (sent chunked).
    public var bodyLength: Int64?

    public init(method: String, url: URL, headers: [(name: String, value: String)], bodyLength: Int64?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.bodyLength = bodyLength
    }
}

/// Where a streamed request's body comes from. Called on the exchanges' thread, which it must
/// never keep waiting.
public protocol StreamedRequestBody: AnyObject, Sendable {
    /// Copies the next bytes into `buffer`. `.later` when none have come yet: the body then
    /// calls `exchange`'s ``StreamedExchange/resume()`` once there are (or the body ended or failed).
    func read(into buffer: UnsafeMutableRawBufferPointer, exchange: StreamedExchange) -> StreamedRead
    /// Starts the body over from its first byte, for libcurl sending the request again on a new
    /// connection (the kept-alive one it chose had closed); `false` when it cannot (what was
    /// read is not kept): the exchange then fails.
    func restart() -> Bool
}

/// What a request body's read gave.
public enum StreamedRead: Sendable {
    /// This many bytes (never 0).
    case bytes(Int)
    /// The body is complete.
    case end
    /// Nothing yet: the exchange waits for ``StreamedExchange/resume()``.
    case later
    /// The body will never complete (the client went away or stalled): the exchange ends.
    case failed
}

/// Where a streamed answer goes. Called on the exchanges' thread, which it must never keep waiting.
public protocol StreamedResponseSink: AnyObject, Sendable {
    /// The answer's status and header fields (names as received, in order, repeated ones kept),
    /// once they are complete (informational 1xx answers are left out).
    func head(status: Int, headers: [(name: String, value: String)])
    /// A piece of the body. `.later` leaves it untaken: the exchange waits for
    /// ``StreamedExchange/resume()`` and then offers the same bytes again.
    func body(_ bytes: UnsafeRawBufferPointer, exchange: StreamedExchange) -> StreamedTake
    /// libcurl has handed over all it had for now and the exchange goes on: what the sink has
    /// gathered should go on too instead of waiting for more, which may come much later (a
    /// stream of events, a long poll). Called at the end of each of the thread's passes in which
    /// the sink was given a head or a piece of body, never after ``finished(_:)``.
    func flush()
    /// The exchange ended: the whole answer came, or it failed with ``HTTPTransportError`` (the
    /// sink may have had its head and part of the body by then). Called once, last.
    func finished(_ outcome: Result<Void, HTTPTransportError>)
}

/// What an answer's sink did with a piece of the body.
public enum StreamedTake: Sendable {
    case taken
    /// Not taken: the exchange waits for ``StreamedExchange/resume()``.
    case later
    /// The exchange ends (the client went away).
    case abort
}

/// The trust and patience of a streamed exchange.
public struct StreamPolicy: Sendable {
    /// A PEM bundle of CAs to trust instead of the system's.
    public var caBundle: [UInt8]?
    public var connectTimeoutMilliseconds: Int
    /// The exchange fails when no byte has moved for this long.
    public var idleTimeoutSeconds: Int
    /// Allow plain http, but only to 127.0.0.1 and ::1.
    public var allowInsecureLoopback: Bool

    public init(caBundle: [UInt8]? = nil, connectTimeoutMilliseconds: Int = 10_000, idleTimeoutSeconds: Int = 120, allowInsecureLoopback: Bool = false) {
        self.caBundle = caBundle
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.allowInsecureLoopback = allowInsecureLoopback
    }

    var requestPolicy: HTTPRequestPolicy { HTTPRequestPolicy(caBundle: caBundle, allowInsecureLoopback: allowInsecureLoopback) }
}

/// Runs ``StreamedRequest``s on a few threads (one per core), each driving libcurl's multi
/// interface: a thread waits for all its exchanges' sockets at once and moves whatever is ready,
/// so that a request costs no thread of its own and no thread switch beyond the two hops to its
/// thread and back, which many requests share under load. The upstream connections stay open in
/// each multi handle's cache for the next exchanges (HTTP/1.1 keep-alive, or one HTTP/2
/// connection multiplexed), and the easy handles are reused.
///
/// An exchange whose body has not come yet, or whose client has not taken the last piece, is
/// paused (``StreamedRead/later``, ``StreamedTake/later``) until ``StreamedExchange/resume()``;
/// one paused for ``StreamPolicy/idleTimeoutSeconds`` fails, as one whose upstream moves no byte
/// for that long does.
public final class StreamedExchanges: Sendable {
    private let drivers: [MultiDriver]
    private let threads: NIOThreadPool
    private let next = Atomic<UInt>(0)

    /// Starts the threads (`threads`, or one per core); they end when this is released
    /// (exchanges still under way then fail).
    /// - Parameter connectionsKept: The idle upstream connections each thread keeps open: as
    ///   many as exchanges may run at once, or a burst's connections are closed as it ends and
    ///   opened again by the next (libcurl's own default follows the exchanges under way).
    public init(threads: Int? = nil, connectionsKept: Int = 64) {
        _ = CurlTransport()  // curl_global_init, once per process
        let count = max(1, threads ?? System.coreCount)
        drivers = (0..<count).map { _ in MultiDriver(connectionsKept: connectionsKept) }
        self.threads = NIOThreadPool(numberOfThreads: count)
        self.threads.start()
        for driver in drivers {
            self.threads.submit { _ in driver.run() }
        }
    }

    deinit {
        for driver in drivers { driver.stop() }
        threads.shutdownGracefully { _ in }
    }

    /// Starts an exchange: its sink hears of it on the exchanges' thread, ending with
    /// ``StreamedResponseSink/finished(_:)``.
    /// - Throws: ``HTTPTransportError`` when the URL is refused or libcurl takes no handle or
    ///   option; the sink then hears nothing.
    @discardableResult
    public func start(
        _ request: StreamedRequest,
        body: (any StreamedRequestBody)?,
        sink: any StreamedResponseSink,
        policy: StreamPolicy
    ) throws(HTTPTransportError) -> StreamedExchange {
        guard policy.requestPolicy.allows(request.url) else {
            throw HTTPTransportError(.forbiddenURL, "\(request.url.scheme ?? "a scheme-less") URL refused: only https (or http to 127.0.0.1/::1)")
        }
        let driver = drivers[Int(next.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(drivers.count))]
        guard let easy = driver.takeHandle() else { throw .noHandle() }
        let exchange = StreamedExchange(easy: easy, url: request.url, body: body, sink: sink, idleSeconds: policy.idleTimeoutSeconds, driver: driver)
        do throws(HTTPTransportError) {
            try exchange.configure(request, policy: policy)
        } catch {
            driver.giveBack(easy)
            throw error
        }
        driver.send(.add(exchange))
        return exchange
    }

    /// The error a failed exchange (or connection) with `url` reports, as a sentence: the
    /// module's one table; a timeout here means no byte moved for the idle timeout.
    static func error(for code: CURLcode, url: URL) -> HTTPTransportError {
        .curl(code, url: url, server: "the upstream", timedOut: "stopped answering")
    }
}

/// One exchange under way. Its state belongs to the exchanges' thread; other threads only
/// ``resume()`` it.
public final class StreamedExchange: @unchecked Sendable {
    fileprivate let easy: UnsafeMutableRawPointer
    private let url: URL
    private let body: (any StreamedRequestBody)?
    fileprivate let sink: any StreamedResponseSink
    private let idleSeconds: Int
    /// Held strongly: a late resume() after the exchanges were released must find it (it then
    /// only queues a command no thread takes).
    private let driver: MultiDriver
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var status = 0
    private var headers: [(name: String, value: String)] = []
    private var headDelivered = false
    private var aborted = false
    /// Since when each way has been paused, if it is: sending, waiting for the request's body,
    /// and receiving, waiting for the client to take the answer. Apart, since a body sent goes on
    /// while the answer waits and the other way round; each is over only when its own way moves.
    fileprivate var sendingPausedSince: ContinuousClock.Instant?
    fileprivate var receivingPausedSince: ContinuousClock.Instant?

    fileprivate var isPaused: Bool { sendingPausedSince != nil || receivingPausedSince != nil }
    /// Its sink was given something in this pass of the thread, and is to flush at its end.
    fileprivate var gathered = false

    fileprivate init(
        easy: UnsafeMutableRawPointer,
        url: URL,
        body: (any StreamedRequestBody)?,
        sink: any StreamedResponseSink,
        idleSeconds: Int,
        driver: MultiDriver
    ) {
        self.easy = easy
        self.url = url
        self.body = body
        self.sink = sink
        self.idleSeconds = idleSeconds
        self.driver = driver
    }

    deinit { ag_curl_slist_free_all(headerList) }

    /// Goes on with a paused exchange (its body has more, or its client took what it had);
    /// from any thread, and harmless when it is not paused or has ended.
    public func resume() {
        driver.send(.resume(self))
    }

    /// Ends the exchange now (its client went away): the upstream connection is closed, and the
    /// sink is told it failed. Nothing happens to one that has ended already.
    public func cancel() {
        driver.send(.cancel(self))
    }

    fileprivate func configure(_ request: StreamedRequest, policy: StreamPolicy) throws(HTTPTransportError) {
        ag_curl_easy_reset(easy)
        for (name, value) in request.headers {
            headerList = ag_curl_slist_append(headerList, "\(name): \(value)")
        }
        // curl's own additions, left out unless the client sent them (a name with nothing after
        // the colon removes curl's header): the request goes on as the client made it.
        for name in ["Expect", "Accept"] where !request.headers.contains(where: { $0.name.lowercased() == name.lowercased() }) {
            headerList = ag_curl_slist_append(headerList, "\(name):")
        }
        if request.bodyLength == -1 {
            headerList = ag_curl_slist_append(headerList, "Transfer-Encoding: chunked")
        }
        var failures = CurlBaseline.apply(
            to: easy,
            url: request.url,
            allowInsecureLoopback: policy.allowInsecureLoopback,
            caBundle: policy.caBundle,
            connectTimeoutMilliseconds: policy.connectTimeoutMilliseconds
        )
        func set(_ code: CURLcode) { if code != CURLE_OK { failures.append(code) } }
        let context = Unmanaged.passUnretained(self).toOpaque()
        set(ag_curl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1))
        set(ag_curl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, policy.idleTimeoutSeconds))
        // The client's own Accept-Encoding goes on and the body comes back as the upstream sent it.
        set(ag_curl_setopt_headers(easy, headerList))
        set(ag_curl_setopt_callback(easy, CURLOPT_WRITEFUNCTION, Self.writeBody))
        set(ag_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        set(ag_curl_setopt_callback(easy, CURLOPT_HEADERFUNCTION, Self.writeHeader))
        set(ag_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
        let method = request.method.uppercased()
        if method == "HEAD" {
            set(ag_curl_setopt_long(easy, CURLOPT_NOBODY, 1))
        } else if let length = request.bodyLength {
            // UPLOAD streams the body through the read callback; the method is then the client's.
            set(ag_curl_setopt_long(easy, CURLOPT_UPLOAD, 1))
            set(ag_curl_setopt_off_t(easy, CURLOPT_INFILESIZE_LARGE, length))
            set(ag_curl_setopt_callback(easy, CURLOPT_READFUNCTION, Self.readBody))
            set(ag_curl_setopt_pointer(easy, CURLOPT_READDATA, context))
            set(ag_curl_setopt_seek(easy, Self.restartBody))
            set(ag_curl_setopt_pointer(easy, CURLOPT_SEEKDATA, context))
            set(ag_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method))
        } else if method != "GET" {
            set(ag_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method))
        }
        guard failures.isEmpty else { throw .refusedOption(failures[0]) }
    }

    /// On the exchanges' thread: libcurl ended the exchange with `code` (or the driver did, with
    /// `error`); the sink hears how.
    fileprivate func finish(_ code: CURLcode, error: HTTPTransportError? = nil) {
        let outcome: Result<Void, HTTPTransportError>
        if let error {
            outcome = .failure(error)
        } else if aborted {
            outcome = .failure(HTTPTransportError(.other, "the client went away"))
        } else if code != CURLE_OK {
            outcome = .failure(StreamedExchanges.error(for: code, url: url))
        } else if !headDelivered {
            // A complete answer that had no body reached the sink's head through the blank line;
            // one whose headers never ended is not complete.
            outcome = .failure(HTTPTransportError(.other, "\(url.host ?? "the upstream") sent no complete answer"))
        } else {
            outcome = .success(())
        }
        sink.finished(outcome)
    }

    /// Whether a way has been paused for longer than the idle time at `now`.
    fileprivate func stalled(at now: ContinuousClock.Instant) -> Bool {
        [sendingPausedSince, receivingPausedSince].contains { since in since.map { now - $0 > .seconds(idleSeconds) } ?? false }
    }

    /// Pauses a way (from its callback), keeping when it was first paused.
    private static func pause(_ since: inout ContinuousClock.Instant?) -> Int {
        if since == nil { since = .now }
        return 0x1000_0001  // CURL_READFUNC_PAUSE, CURL_WRITEFUNC_PAUSE
    }

    static let readBody: ag_curl_data_callback = { data, size, count, context in
        let exchange = Unmanaged<StreamedExchange>.fromOpaque(context!).takeUnretainedValue()
        guard let body = exchange.body else { return 0 }
        switch body.read(into: UnsafeMutableRawBufferPointer(start: data, count: size * count), exchange: exchange) {
        case .bytes(let count):
            exchange.sendingPausedSince = nil
            return count
        case .end:
            exchange.sendingPausedSince = nil
            return 0
        case .later: return pause(&exchange.sendingPausedSince)
        case .failed:
            exchange.aborted = true
            return 0x1000_0000  // CURL_READFUNC_ABORT
        }
    }

    static let restartBody: ag_curl_seek_callback = { context, offset, origin in
        let exchange = Unmanaged<StreamedExchange>.fromOpaque(context!).takeUnretainedValue()
        // SEEK_SET to 0, the only seek a restart needs.
        guard offset == 0, origin == 0, exchange.body?.restart() == true else { return 2 }  // CURL_SEEKFUNC_CANTSEEK
        exchange.sendingPausedSince = nil
        return 0  // CURL_SEEKFUNC_OK
    }

    static let writeBody: ag_curl_data_callback = { data, size, count, context in
        let exchange = Unmanaged<StreamedExchange>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        guard exchange.headDelivered else {
            exchange.aborted = true
            return 0  // a body before the head's end: not an answer to pass on
        }
        switch exchange.sink.body(UnsafeRawBufferPointer(start: data, count: length), exchange: exchange) {
        case .taken:
            exchange.receivingPausedSince = nil
            exchange.driver.gathered(exchange)
            return length
        case .later: return pause(&exchange.receivingPausedSince)
        case .abort:
            exchange.aborted = true
            return 0  // anything but `length` makes curl stop
        }
    }

    static let writeHeader: ag_curl_data_callback = { data, size, count, context in
        let exchange = Unmanaged<StreamedExchange>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        exchange.headerLine(UnsafeRawBufferPointer(start: data, count: length).bindMemory(to: UInt8.self))
        return length
    }

    /// One line of an answer's head as curl hands it over, line break included: read as bytes
    /// (a head's lines are ASCII; other bytes in a value go on as UTF-8, invalid ones replaced).
    private func headerLine(_ bytes: UnsafeBufferPointer<UInt8>) {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        let line = UnsafeBufferPointer(rebasing: bytes[..<end])
        func text(_ range: Range<Int>) -> String {
            var range = range
            while let first = range.first, isSpace(line[first]) { range = range.dropFirst() }
            while let last = range.last, isSpace(line[last]) { range = range.dropLast() }
            return String(decoding: UnsafeBufferPointer(rebasing: line[range]), as: UTF8.self)
        }
        if line.starts(with: "HTTP/".utf8) {
            // A new answer (after 100 Continue, or a 103) starts over: "HTTP/1.1 200 OK".
            headers.removeAll()
            status = 0
            if let space = line.firstIndex(of: 0x20) {
                var digits = 0
                for byte in line[(space + 1)...] {
                    guard (0x30...0x39).contains(byte), digits < 3 else { break }
                    status = status * 10 + Int(byte - 0x30)
                    digits += 1
                }
                if digits != 3 { status = 0 }
            }
        } else if line.isEmpty {
            guard !(100..<200).contains(status), !headDelivered else { return }
            headDelivered = true
            sink.head(status: status, headers: headers)
            driver.gathered(self)
        } else if isSpace(line[0]), !headers.isEmpty {
            // An obsolete folded line (RFC 9112 §5.2) continues the previous field.
            headers[headers.count - 1].value += " " + text(0..<line.count)
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            headers.append((text(0..<colon), text((colon + 1)..<line.count)))
        }
    }
}

/// The multi handle and the loop that drives it, on the exchanges' one thread. Other threads
/// reach it only through ``send(_:)`` (and the pool of idle easy handles).
private final class MultiDriver: @unchecked Sendable {
    enum Command {
        case add(StreamedExchange)
        case resume(StreamedExchange)
        case cancel(StreamedExchange)
    }

    private struct Inbox {
        var commands: [Command] = []
        var stopping = false
        /// The thread waits in curl_multi_poll: a command must wake it. Otherwise it takes the
        /// commands before it waits next, and a busy thread is spared a wake-up per request.
        var waiting = false
    }

    /// nil when libcurl could not make one: every exchange then fails as it starts.
    private let multi: UnsafeMutableRawPointer?
    private let inbox = Mutex(Inbox())
    /// Easy handles between exchanges (each keeps its TLS session cache), as addresses.
    private let idle = Mutex<[UInt]>([])
    private static let idleKept = 64
    // The thread's own:
    private var running: [UnsafeMutableRawPointer: StreamedExchange] = [:]
    private var lastStallCheck = ContinuousClock.now
    /// The exchanges whose sinks were given something in this pass.
    private var toFlush: [StreamedExchange] = []

    init(connectionsKept: Int) {
        multi = ag_curl_multi_init()
        if let multi { _ = ag_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(1, connectionsKept)) }
    }

    deinit {
        for easy in idle.withLock({ $0 }) { ag_curl_easy_cleanup(UnsafeMutableRawPointer(bitPattern: easy)!) }
        if let multi { ag_curl_multi_cleanup(multi) }
    }

    func takeHandle() -> UnsafeMutableRawPointer? {
        guard multi != nil else { return nil }
        return idle.withLock { $0.popLast() }.flatMap(UnsafeMutableRawPointer.init(bitPattern:)) ?? ag_curl_easy_init()
    }

    func giveBack(_ easy: UnsafeMutableRawPointer) {
        let kept = idle.withLock { handles in
            guard handles.count < Self.idleKept else { return false }
            handles.append(UInt(bitPattern: easy))
            return true
        }
        if !kept { ag_curl_easy_cleanup(easy) }
    }

    /// Hands a command to the thread and wakes it.
    func send(_ command: Command) {
        let wake = inbox.withLock { inbox in
            inbox.commands.append(command)
            defer { inbox.waiting = false }
            return inbox.waiting
        }
        if wake, let multi { _ = ag_curl_multi_wakeup(multi) }
    }

    func stop() {
        inbox.withLock { $0.stopping = true }
        if let multi { _ = ag_curl_multi_wakeup(multi) }
    }

    /// The thread's loop, until ``stop()``.
    func run() {
        guard let multi else { return }
        while true {
            let inbox = inbox.withLock { inbox in
                defer { inbox.commands = [] }
                return inbox
            }
            for command in inbox.commands {
                switch command {
                case .add(let exchange):
                    guard ag_curl_multi_add_handle(multi, exchange.easy) == CURLM_OK else {
                        giveBack(exchange.easy)
                        exchange.finish(CURLE_FAILED_INIT, error: HTTPTransportError(.other, "libcurl took no more exchanges"))
                        continue
                    }
                    running[exchange.easy] = exchange
                case .resume(let exchange):
                    // Both ways go on: one with nothing new is paused again by its callback, its
                    // time kept (and curl hands a paused answer's bytes over at once).
                    guard running[exchange.easy] === exchange, exchange.isPaused else { continue }
                    _ = ag_curl_easy_pause(exchange.easy, 0)  // CURLPAUSE_CONT
                case .cancel(let exchange):
                    guard running[exchange.easy] === exchange else { continue }
                    end(exchange, CURLE_ABORTED_BY_CALLBACK, error: HTTPTransportError(.other, "the client went away"))
                }
            }
            if inbox.stopping {
                for exchange in running.values {
                    end(exchange, CURLE_ABORTED_BY_CALLBACK, error: HTTPTransportError(.other, "the proxy stopped"))
                }
                return
            }
            var active: Int32 = 0
            _ = ag_curl_multi_perform(multi, &active)
            var easy: UnsafeMutableRawPointer?
            var code = CURLE_OK
            while ag_curl_multi_next_done(multi, &easy, &code) == 1 {
                if let easy, let exchange = running[easy] { end(exchange, code) }
            }
            // What the ended exchanges gathered went with their end; the others' goes now.
            for exchange in toFlush {
                exchange.gathered = false
                if running[exchange.easy] === exchange { exchange.sink.flush() }
            }
            toFlush.removeAll(keepingCapacity: true)
            endStalled()
            // Commands that came while this pass ran are taken first; otherwise the thread waits
            // for a socket, curl's own timeout or a command, at most a second (a paused
            // exchange's idle time is checked as the loop comes by).
            let idle = self.inbox.withLock { inbox in
                inbox.waiting = inbox.commands.isEmpty && !inbox.stopping
                return inbox.waiting
            }
            if idle {
                _ = ag_curl_multi_poll(multi, 1000)
                self.inbox.withLock { $0.waiting = false }
            }
        }
    }

    /// On the thread: `exchange`'s sink was given something, to flush as this pass ends.
    func gathered(_ exchange: StreamedExchange) {
        guard !exchange.gathered else { return }
        exchange.gathered = true
        toFlush.append(exchange)
    }

    private func end(_ exchange: StreamedExchange, _ code: CURLcode, error: HTTPTransportError? = nil) {
        guard let multi else { return }
        running[exchange.easy] = nil
        _ = ag_curl_multi_remove_handle(multi, exchange.easy)
        giveBack(exchange.easy)
        exchange.finish(code, error: error)
    }

    /// Ends the exchanges paused for longer than their idle time (their client sent or took
    /// nothing), once a second.
    private func endStalled() {
        let now = ContinuousClock.now
        guard now - lastStallCheck >= .seconds(1) else { return }
        lastStallCheck = now
        for exchange in running.values where exchange.stalled(at: now) {
            end(exchange, CURLE_OPERATION_TIMEDOUT, error: HTTPTransportError(.timedOut, "the client moved no byte for the idle time"))
        }
    }
}
