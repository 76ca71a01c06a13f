import AuthGateTestSupport
import NIOCore
import Testing

@testable import AuthGateServer

/// ``DeadlineState`` in process, event by event, on made-up times: which clock runs when
/// (ConnectionHandlerTests runs the same rules with their timers on an EmbeddedChannel).
@Suite("A connection's deadlines (DeadlineState)")
struct DeadlineStateTests {
    private let limits = ConnectionLimits(maximumConnections: 8, requestTimeout: .seconds(10), idleTimeout: .seconds(300))

    private func at(_ seconds: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(1_000_000_000 + seconds * 1_000_000_000)) }

    @Test("the first byte stops the first-byte clock, once; a connection handed on after a byte has none")
    func firstByte() {
        var state = DeadlineState(limits: limits, bytesArrived: false)
        #expect(state.needsFirstByteClock)
        let started = state.started(now: at(0))
        #expect(started.idleCheckAt == at(300), "idle from the start")
        let first = state.bytesRead(finishedLines: 0, last: UInt8(ascii: "{"), now: at(1))
        #expect(first.stopFirstByteClock && first.idleCheckAt == nil)
        let second = state.bytesRead(finishedLines: 1, last: UInt8(ascii: "\n"), now: at(2))
        #expect(!second.stopFirstByteClock)
        #expect(!DeadlineState(limits: limits, bytesArrived: true).needsFirstByteClock)
    }

    @Test("an unfinished line's clock starts when the server asks for more, not before; more bytes do not restart it; its newline stops it")
    func requestClock() {
        var state = DeadlineState(limits: limits, bytesArrived: true)
        _ = state.started(now: at(0))
        #expect(state.readRequested().requestClock == nil, "no partial line: no clock")
        _ = state.bytesRead(finishedLines: 0, last: UInt8(ascii: "a"), now: at(1))
        #expect(state.idleSince == nil, "a partial line is not idle")
        #expect(state.readRequested().requestClock == true)
        _ = state.bytesRead(finishedLines: 0, last: UInt8(ascii: "b"), now: at(2))
        #expect(state.readRequested().requestClock == nil, "dripping bytes keep the first clock")
        let finished = state.bytesRead(finishedLines: 1, last: UInt8(ascii: "\n"), now: at(3))
        #expect(finished.requestClock == false)
        #expect(state.idleSince == nil, "a request waits for its answer: not idle")
    }

    @Test("idle: only with no partial line and every line answered; one check at a time, which looks again when activity moved the start")
    func idle() {
        var state = DeadlineState(limits: limits, bytesArrived: true)
        #expect(state.started(now: at(0)).idleCheckAt == at(300))
        _ = state.bytesRead(finishedLines: 1, last: UInt8(ascii: "\n"), now: at(10))
        #expect(state.idleSince == nil)
        #expect(state.idleCheckFired(now: at(300)) == .busy, "a request in progress is never idle")
        let answered = state.answerWritten(now: at(400))
        #expect(state.idleSince == at(400) && answered.idleCheckAt == at(700), "idle again: a new check")
        _ = state.bytesRead(finishedLines: 1, last: UInt8(ascii: "\n"), now: at(500))
        #expect(state.answerWritten(now: at(550)).idleCheckAt == nil, "a check is pending already")
        #expect(state.idleCheckFired(now: at(700)) == .checkAgain(at: at(850)))
        #expect(state.idleCheckFired(now: at(850)) == .close)
    }

    @Test("a watch is never idle; an unfinished last line at the end of input counts as a request")
    func watchAndHalfClose() {
        var watching = DeadlineState(limits: limits, bytesArrived: true)
        _ = watching.started(now: at(0))
        watching.watchStarted()
        #expect(watching.idleCheckFired(now: at(300)) == .busy)
        #expect(watching.answerWritten(now: at(301)).idleCheckAt == nil && watching.idleSince == nil)

        var halfClosed = DeadlineState(limits: limits, bytesArrived: true)
        _ = halfClosed.bytesRead(finishedLines: 0, last: UInt8(ascii: "}"), now: at(1))
        _ = halfClosed.readRequested()
        let ended = halfClosed.inputEnded(now: at(2))
        #expect(ended.requestClock == false)
        #expect(halfClosed.idleSince == nil, "the last line waits for its answer")
        _ = halfClosed.answerWritten(now: at(3))
        #expect(halfClosed.idleSince == at(3))
    }
}
