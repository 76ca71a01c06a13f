import AuthGateTestSupport
import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import AuthGateServer

/// A watching connection's notifications (WatchSink) on an EmbeddedChannel.
@Suite("A watching connection (WatchSink)")
struct WatchSinkTests {
    @Test(
        "what waits for the connection's close runs once when it closes, what was taken back never; taken-back ones are forgotten, and one registered after the close runs at once"
    )
    func closeActions() throws {
        let channel = EmbeddedChannel()
        let sink = WatchSink(channel: channel, uid: 1000, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let ran = Mutex<[String]>([])
        for index in 0..<10_000 {
            let handle = sink.onClose { ran.withLock { $0.append("refused \(index)") } }
            sink.cancelOnClose(handle)
        }
        #expect(sink.closeActionsWaiting == 0, "refused watches leave nothing behind")
        sink.onClose { ran.withLock { $0.append("kept") } }
        _ = try? channel.finish()
        channel.embeddedEventLoop.run()
        #expect(ran.withLock { $0 } == ["kept"])
        sink.onClose { ran.withLock { $0.append("late") } }
        #expect(ran.withLock { $0 } == ["kept", "late"])
    }

    @Test("a watcher that does not read is dropped when its connection's buffer is full, not buffered for")
    func slowWatcherDropped() throws {
        let channel = EmbeddedChannel()
        let sink = WatchSink(channel: channel, uid: 1000, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/x")).wait()
        sink.willAnswer(with: "t0")
        sink.answerWritten()
        sink.send(Array("{\"method\":\"token.changed\"}\n".utf8), accessToken: "t1")
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self) != nil, "written while the client reads")
        channel.isWritable = false  // the client stopped reading: NIO's outbound buffer is over its mark
        sink.send(Array("{\"method\":\"token.changed\"}\n".utf8), accessToken: "t2")
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(!channel.isActive, "closed")
    }
}
