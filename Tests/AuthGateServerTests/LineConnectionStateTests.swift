import AuthGateTestSupport
import NIOCore
import Testing

@testable import AuthGateServer

/// ``LineConnectionState`` in process, event by event: the serving decisions of a handed-on
/// connection without a channel (RPCServerTests and UnreadAnswersTests prove them through the
/// socket).
@Suite("A connection's serving decisions (LineConnectionState)")
struct LineConnectionStateTests {
    private func line(_ text: String) -> LineFrame { .line(ByteBuffer(string: text)) }

    private func text(_ frame: LineFrame?) -> String? {
        guard case .line(let buffer)? = frame else { return nil }
        return String(buffer: buffer)
    }

    @Test("a line with nothing in flight is served at once; lines behind a request wait, in order, and reads are held until they are served")
    func oneRequestAtATime() {
        var state = LineConnectionState(admitted: true)
        let step1 = state.lineArrived(line("a"), writable: true)
        #expect(step1 == .serve)
        state.requestStarted()
        let step2 = state.readRequested(writable: true)
        #expect(step2, "nothing waits yet: the rest of a line may still arrive")
        let step3 = state.lineArrived(line("b"), writable: true)
        #expect(step3 == .wait)
        let step4 = state.lineArrived(line("c"), writable: true)
        #expect(step4 == .wait)
        let step5 = state.readRequested(writable: true)
        #expect(!step5, "a whole line waits: the socket is not read")
        let step6 = state.nextWaiting(writable: true)
        #expect(step6 == nil, "not while the request is in flight")
        state.requestFinished()
        let step7 = state.resumeReading(writable: true)
        #expect(!step7, "not before the waiting lines are served")
        let step8 = text(state.nextWaiting(writable: true))
        #expect(step8 == "b")
        state.requestStarted()
        let step9 = state.nextWaiting(writable: true)
        #expect(step9 == nil)
        state.requestFinished()
        let step10 = text(state.nextWaiting(writable: true))
        #expect(step10 == "c")
        let step11 = state.nextWaiting(writable: true)
        #expect(step11 == nil)
        let step12 = state.resumeReading(writable: true)
        #expect(step12)
        let step13 = state.resumeReading(writable: true)
        #expect(!step13, "a held read goes on once")
    }

    @Test("a client that does not read its answers: its lines wait and the socket is not read until the channel is writable again")
    func unreadAnswers() {
        var state = LineConnectionState(admitted: true)
        let step14 = state.lineArrived(line("a"), writable: false)
        #expect(step14 == .wait)
        let step15 = state.readRequested(writable: false)
        #expect(!step15)
        let step16 = state.nextWaiting(writable: false)
        #expect(step16 == nil)
        let step17 = state.resumeReading(writable: true)
        #expect(!step17, "the waiting line first")
        let step18 = text(state.nextWaiting(writable: true))
        #expect(step18 == "a")
        let step19 = state.resumeReading(writable: true)
        #expect(step19)
    }

    @Test("more than 64 KiB of lines waiting ends the connection; nothing is served after")
    func tooMuchWaiting() {
        var state = LineConnectionState(admitted: true)
        state.requestStarted()
        let big = line(String(repeating: "x", count: 40 * 1024))
        let step20 = state.lineArrived(big, writable: true)
        #expect(step20 == .wait)
        let step21 = state.lineArrived(big, writable: true)
        #expect(step21 == .refuseTooMuchWaiting)
        state.finish()
        #expect(state.waitingCount == 0 && state.closing)
        state.requestFinished()
        let step22 = state.nextWaiting(writable: true)
        #expect(step22 == nil)
        let step23 = state.lineArrived(line("late"), writable: true)
        #expect(step23 == .drop)
        let step24 = state.readRequested(writable: true)
        #expect(!step24, "a closing connection reads nothing more")
    }

    @Test("a half-closed connection closes once every line is answered, not before")
    func halfClose() {
        var state = LineConnectionState(admitted: true)
        let step25 = state.lineArrived(line("a"), writable: true)
        #expect(step25 == .serve)
        state.requestStarted()
        let step26 = state.lineArrived(line("b"), writable: true)
        #expect(step26 == .wait)
        state.inputEnded()
        let step27 = state.closeIfDone()
        #expect(!step27, "a request is in flight")
        state.requestFinished()
        let step28 = state.closeIfDone()
        #expect(!step28, "a line still waits")
        let step29 = text(state.nextWaiting(writable: true))
        #expect(step29 == "b")
        let step30 = state.closeIfDone()
        #expect(step30)
        let step31 = state.closeIfDone()
        #expect(!step31, "closed once")
        let step32 = state.lineArrived(line("c"), writable: true)
        #expect(step32 == .drop)
    }

    @Test("answers are flushed once per batch; a connection refused at admission serves nothing")
    func flushesAndRefusal() {
        var state = LineConnectionState(admitted: true)
        let step33 = state.flushNow()
        #expect(!step33)
        state.answerWritten()
        state.answerWritten()
        let step34 = state.flushNow()
        #expect(step34)
        let step35 = state.flushNow()
        #expect(!step35)
        var refused = LineConnectionState(admitted: false)
        let step36 = refused.lineArrived(line("a"), writable: true)
        #expect(step36 == .drop)
        #expect(refused.waitingCount == 0)
    }
}
