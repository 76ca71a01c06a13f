import AuthGateCore
import AuthGateHTTP
import AuthGateTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// libcurl's multi interface behind StreamedExchanges, in process, against a plain HTTP
/// stand-in on loopback: exchanges share the driving threads, pause when their body has not
/// come or their answer is not taken, go on when resumed, and fail when paused too long.
@Suite("HTTP: streamed exchanges on libcurl's multi interface")
struct StreamedExchangesTests {
    /// For what is not about the idle time: patient enough for a loaded machine (a serial test
    /// server keeps 40 exchanges waiting, and a full test run can stall one for a second).
    static let patient = StreamPolicy(idleTimeoutSeconds: 60, allowInsecureLoopback: true)
    /// An idle time the test waits out.
    static let impatient = StreamPolicy(idleTimeoutSeconds: 1, allowInsecureLoopback: true)

    @Test(
        "an answer whose pieces are left untaken pauses its exchange until resumed, and arrives whole and in order; a body that has not come yet is sent once it comes; 40 exchanges at once on one thread all end"
    )
    func pausedAndResumed() throws {
        let answer = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let server = try LoopbackHTTPServer { request in
            LoopbackHTTPServer.response(200, headers: [("X-Seen", "\(request.utf8.count)")], body: request.hasPrefix("PUT") ? Array("stored".utf8) : answer)
        }
        let exchanges = StreamedExchanges(threads: 1)
        let url = try #require(URL(string: server.url + "/file"))

        // Every second piece is left untaken once and taken after a resume from another thread.
        let slow = RecordingSink(leavesEverySecondPiece: true)
        try exchanges.start(StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil), body: nil, sink: slow, policy: Self.patient)
        let slowOutcome = try #require(slow.outcome(within: 30))
        #expect(slowOutcome.error == nil, "\(slowOutcome)")
        #expect(slow.status == 200 && slow.bytes == answer)
        #expect(slow.pauses > 1, "the sink left pieces \(slow.pauses) times")

        // A body that comes after the exchange has asked for it.
        let body = LateBody(Array("late but whole".utf8))
        let stored = RecordingSink()
        try exchanges.start(
            StreamedRequest(method: "PUT", url: url, headers: [(name: "Content-Type", value: "text/plain")], bodyLength: 14),
            body: body,
            sink: stored,
            policy: Self.patient
        )
        #expect(body.waitUntilAsked(within: 30), "curl asked for the body")
        body.arrive()
        #expect(try #require(stored.outcome(within: 30)).error == nil)
        #expect(stored.status == 200 && stored.bytes == Array("stored".utf8))
        #expect(server.requests.last?.hasSuffix("\r\n\r\nlate but whole") == true, "\(server.requests.last ?? "")")

        let many = (0..<40).map { _ in RecordingSink() }
        for sink in many {
            try exchanges.start(StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil), body: nil, sink: sink, policy: Self.patient)
        }
        for sink in many {
            #expect(try #require(sink.outcome(within: 60)).error == nil)
            #expect(sink.bytes.count == answer.count)
        }
    }

    @Test(
        "an exchange paused for longer than the idle time fails, one whose body never comes too, while an exchange beside them on the same thread ends as it should"
    )
    func pausedTooLong() throws {
        let server = try LoopbackHTTPServer { _ in LoopbackHTTPServer.response(200, body: Array(repeating: 1, count: 1 << 20)) }
        let exchanges = StreamedExchanges(threads: 1)
        let url = try #require(URL(string: server.url + "/"))
        let stuck = RecordingSink(takesNothing: true)
        try exchanges.start(StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil), body: nil, sink: stuck, policy: Self.impatient)
        let silent = RecordingSink()
        let never = LateBody(Array("never".utf8))
        try exchanges.start(StreamedRequest(method: "PUT", url: url, headers: [], bodyLength: 5), body: never, sink: silent, policy: Self.impatient)
        let started = ContinuousClock.now
        let stuckError = try #require(stuck.outcome(within: 30)?.error)
        #expect(stuckError.kind == .timedOut || stuckError.message.contains("client"), "\(stuckError)")
        #expect(try #require(silent.outcome(within: 30)).error != nil)
        #expect(ContinuousClock.now - started >= .seconds(1), "not before the idle time")

        let fine = RecordingSink()
        try exchanges.start(StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil), body: nil, sink: fine, policy: Self.patient)
        #expect(try #require(fine.outcome(within: 30)).error == nil)
        #expect(fine.bytes.count == 1 << 20)
    }
}

extension StreamedExchangesTests {
    @Test(
        "an answer that comes slowly reaches its sink as it comes: the head and a first event are flushed while the upstream waits to send the next"
    )
    func slowAnswerFlushedAsItComes() throws {
        let first = Array("data: one\n\n".utf8)
        let second = Array("data: two\n\n".utf8)
        let head = Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        let firstChunk = head + Array("b\r\n".utf8) + first + Array("\r\n".utf8)
        let server = try LoopbackHTTPServer(pausingAfter: firstChunk.count) { _ in
            firstChunk + Array("b\r\n".utf8) + second + Array("\r\n0\r\n\r\n".utf8)
        }
        let exchanges = StreamedExchanges(threads: 1)
        let sink = RecordingSink()
        let url = try #require(URL(string: server.url + "/events"))
        try exchanges.start(StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil), body: nil, sink: sink, policy: Self.patient)
        // The upstream sends the rest only once the first event has been flushed.
        let flushed = try #require(sink.firstFlush(within: 30), "no flush while the upstream waited")
        #expect(flushed.status == 200 && flushed.bytes == first)
        server.release()
        #expect(try #require(sink.outcome(within: 30)).error == nil)
        #expect(sink.bytes == first + second)
    }

    @Test(
        "a request's body that comes late is sent when it comes while the answer has started to arrive: the answer's moving does not lose the body's resume"
    )
    func bodyResumedWhileAnswerArrives() throws {
        let answer = Array(repeating: UInt8(7), count: 64 << 10)
        let head = LoopbackHTTPServer.response(200, body: answer).count - answer.count
        // The upstream answers its first 1,000 bytes at once and the rest after the whole body.
        let server = try LoopbackHTTPServer(pausingAfter: head + 1000, answeringAtHead: true) { _ in
            LoopbackHTTPServer.response(200, body: answer)
        }
        let exchanges = StreamedExchanges(threads: 1)
        let sink = RecordingSink()
        let body = LateBody(Array(repeating: 1, count: 4096), first: 1024)
        try exchanges.start(
            StreamedRequest(method: "POST", url: try #require(URL(string: server.url + "/convert")), headers: [], bodyLength: 4096),
            body: body,
            sink: sink,
            policy: Self.patient
        )
        // The body waits (its way paused); then the answer's first bytes are taken.
        #expect(body.waitUntilAsked(within: 30))
        #expect(try #require(sink.firstFlush(within: 30)).bytes.count == 1000)
        body.arrive()
        let outcome = try #require(sink.outcome(within: 30), "the rest of the body was never sent")
        #expect(outcome.error == nil, "\(outcome)")
        #expect(sink.bytes == answer)
    }

    @Test(
        "a request with a body is sent again, body and all, on a new connection when the kept-alive connection libcurl chose had closed"
    )
    func bodySentAgainOnNewConnection() throws {
        let server = try KeepAliveServer(dropsSecondRequest: true)
        let exchanges = StreamedExchanges(threads: 1)
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/"))
        let first = RecordingSink()
        try exchanges.start(StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil), body: nil, sink: first, policy: Self.patient)
        #expect(try #require(first.outcome(within: 30)).error == nil)
        // On the kept connection, which the server closes after reading it: libcurl starts the
        // body over on a new one (it failed with "necessary data rewind wasn't possible").
        let posted = RecordingSink()
        let body = LateBody(Array(repeating: 5, count: 3000), first: 3000)
        try exchanges.start(StreamedRequest(method: "POST", url: url, headers: [], bodyLength: 3000), body: body, sink: posted, policy: Self.patient)
        let outcome = try #require(posted.outcome(within: 30))
        #expect(outcome.error == nil, "\(outcome)")
        #expect(posted.bytes == Array("ok".utf8))
        #expect(server.connections == 2 && server.answered == 3, "\(server.connections) connections, \(server.answered) requests read")
    }

    @Test(
        "upstream connections are kept for the next exchanges: 32 callers sending 200 requests each, one after the other, on two threads open at most 32 connections a thread"
    )
    func connectionsKeptForTheNextExchanges() throws {
        let server = try KeepAliveServer()
        let exchanges = StreamedExchanges(threads: 2, connectionsKept: 32)
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/"))
        // 32 callers, each sending its next request when the last is answered, as the proxy's
        // clients do: the exchanges under way come and go, and libcurl's own limit (four
        // connections for each exchange under way) would close connections whenever few are.
        let callers = DispatchGroup()
        for _ in 0..<32 {
            callers.enter()
            Thread {
                defer { callers.leave() }
                for _ in 0..<200 {
                    let sink = RecordingSink()
                    guard
                        (try? exchanges.start(
                            StreamedRequest(method: "GET", url: url, headers: [], bodyLength: nil),
                            body: nil,
                            sink: sink,
                            policy: Self.patient
                        )) != nil,
                        sink.outcome(within: 30)?.error == nil, sink.bytes == Array("ok".utf8)
                    else { return }
                }
            }.start()
        }
        #expect(callers.wait(timeout: .now() + 60) == .success)
        #expect(server.answered == 6400)
        // Each thread keeps up to 32; without that, libcurl closed connections as the exchanges
        // under way dwindled and opened them again: 212 here.
        #expect(server.connections <= 64, "\(server.connections) connections for 6400 exchanges")
    }
}

/// A plain HTTP/1.1 server on 127.0.0.1 that keeps connections open: a thread for each, every
/// request (and its Content-Length body) answered `200 ok`; it counts the connections it
/// accepted and the requests it read. With `dropsSecondRequest`, the second request on its
/// first connection is read and the connection closed unanswered, as an upstream closing a
/// kept-alive connection just as a request comes does.
private final class KeepAliveServer: Sendable {
    let port: Int
    private let listener: Int32
    private let counts = Counts()

    private final class Counts: Sendable {
        let value = Mutex<(connections: Int, answers: Int)>((0, 0))
    }

    var connections: Int { counts.value.withLock { $0.connections } }
    /// The requests read (all answered but one dropped).
    var answered: Int { counts.value.withLock { $0.answers } }

    init(dropsSecondRequest: Bool = false) throws {
        let (socketFD, port) = try LoopbackHTTPServer.listen(backlog: 64)
        listener = socketFD
        self.port = port
        let counts = counts
        Thread {
            defer { close(socketFD) }
            while case let connection = accept(socketFD, nil, nil), connection >= 0 {
                let first = counts.value.withLock { counts in
                    counts.connections += 1
                    return counts.connections == 1
                }
                Thread {
                    defer { close(connection) }
                    var pending: [UInt8] = []
                    var chunk = [UInt8](repeating: 0, count: 4096)
                    let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
                    var requests = 0
                    while true {
                        while let (length, start) = LoopbackHTTPServer.bodyLength(pending), pending.count - start >= length {
                            pending.removeSubrange(..<(start + length))
                            requests += 1
                            counts.value.withLock { $0.answers += 1 }
                            if dropsSecondRequest && first && requests == 2 { return }
                            guard answer.withUnsafeBytes({ send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == answer.count else { return }
                        }
                        let count = chunk.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
                        guard count > 0 else { return }
                        pending += chunk[..<count]
                    }
                }.start()
            }
        }.start()
    }

    deinit { shutdown(listener, Int32(SHUT_RDWR)) }
}

/// Keeps an answer, leaving pieces untaken as told, and how the exchange ended (for the
/// module's tests of streamed exchanges).
final class RecordingSink: StreamedResponseSink, @unchecked Sendable {
    private let leavesEverySecondPiece: Bool
    private let takesNothing: Bool
    private let ended = DispatchSemaphore(value: 0)
    // Touched on the exchanges' thread only, read after `ended`.
    private(set) var status = 0
    private(set) var bytes: [UInt8] = []
    private(set) var pauses = 0
    private var pieces = 0
    private var result: Result<Void, HTTPTransportError>?
    private var flushed: (status: Int, bytes: [UInt8])?
    private let flushedOnce = DispatchSemaphore(value: 0)

    init(leavesEverySecondPiece: Bool = false, takesNothing: Bool = false) {
        self.leavesEverySecondPiece = leavesEverySecondPiece
        self.takesNothing = takesNothing
    }

    func head(status: Int, headers: [(name: String, value: String)]) { self.status = status }

    func body(_ piece: UnsafeRawBufferPointer, exchange: StreamedExchange) -> StreamedTake {
        if takesNothing { return .later }
        pieces += 1
        if leavesEverySecondPiece && pieces % 2 == 0 {
            pauses += 1
            DispatchQueue.global().async { exchange.resume() }
            return .later
        }
        bytes += piece
        return .taken
    }

    func flush() {
        guard flushed == nil, !bytes.isEmpty else { return }
        flushed = (status, bytes)
        flushedOnce.signal()
    }

    func finished(_ outcome: Result<Void, HTTPTransportError>) {
        result = outcome
        ended.signal()
    }

    /// The status and bytes it had at its first flush that had some body.
    func firstFlush(within seconds: Int) -> (status: Int, bytes: [UInt8])? {
        guard flushedOnce.wait(timeout: .now() + .seconds(seconds)) == .success else { return nil }
        return flushed
    }

    func outcome(within seconds: Int) -> Result<Void, HTTPTransportError>? {
        guard ended.wait(timeout: .now() + .seconds(seconds)) == .success else { return nil }
        return result
    }
}

/// A request body whose first `first` bytes are there at once and the rest only after
/// ``arrive()``.
private final class LateBody: StreamedRequestBody, Sendable {
    private let bytes: [UInt8]
    private let first: Int
    private let state = Mutex<(arrived: Bool, offset: Int, waiting: StreamedExchange?)>((false, 0, nil))
    private let asked = DispatchSemaphore(value: 0)

    init(_ bytes: [UInt8], first: Int = 0) {
        self.bytes = bytes
        self.first = first
    }

    func restart() -> Bool {
        state.withLock { $0.offset = 0 }
        return true
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, exchange: StreamedExchange) -> StreamedRead {
        let step = state.withLock { state -> StreamedRead in
            let available = state.arrived ? bytes.count : first
            guard state.offset < available else {
                if state.offset == bytes.count { return .end }
                state.waiting = exchange
                return .later
            }
            let count = min(available - state.offset, buffer.count)
            bytes[state.offset..<(state.offset + count)].withUnsafeBytes { buffer.copyMemory(from: $0) }
            state.offset += count
            return .bytes(count)
        }
        if case .later = step { asked.signal() }
        return step
    }

    func waitUntilAsked(within seconds: Int) -> Bool { asked.wait(timeout: .now() + .seconds(seconds)) == .success }

    func arrive() {
        state.withLock { state in
            state.arrived = true
            defer { state.waiting = nil }
            return state.waiting
        }?.resume()
    }
}

extension Result where Failure == HTTPTransportError {
    var error: HTTPTransportError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
