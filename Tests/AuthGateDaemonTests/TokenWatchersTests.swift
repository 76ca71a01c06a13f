import AuthGateCore
import AuthGateTestSupport
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import AuthGateDaemon
@testable import AuthGateServer

/// The token.watch subscriptions (TokenWatchers) in process, writing to an EmbeddedChannel
/// through the server's WatchSink: who is told, who is dropped, how many a user may hold.
@Suite("Token watchers (TokenWatchers)")
struct TokenWatchersTests {
    @Test(
        "every notification asks the provider's access now: a watcher no longer admitted gets session.ended access_revoked and its connection closes"
    )
    func notificationsRecheckAccess() throws {
        let access = ProviderAccess()
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        func provider(_ json: String) -> RegisteredProvider {
            RegisteredProvider.make(ProviderConfigurationLoader.parse(Data(json.utf8), id: "mock", file: "mock.json"), logger: logger)
        }
        access.update([provider(#"{"type": "mock"}"#)])
        let watchers = TokenWatchers(access: access)
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/tmp/x")).wait()
        let sink = WatchSink(channel: channel, uid: 65534, logger: logger)
        let key = SessionKey(uid: 65534, provider: ProviderID("mock")!, name: .default)
        _ = try watchers.add(key, sink: sink, caller: PeerCredentials(pid: 1, uid: 65534, gid: 65534), bounded: true)
        sink.willAnswer(with: "t0")
        sink.answerWritten()
        let tokens = TokenSet(accessToken: Secret("t1"), expiresAt: Date().addingTimeInterval(60))
        watchers.tokensChanged(key, tokens)
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) }?.contains("token.changed") == true, "admitted: told")

        access.update([provider(#"{"type": "mock", "access": {"users": ["root"]}}"#)])
        watchers.tokensChanged(key, tokens)
        channel.embeddedEventLoop.run()
        let line = try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } ?? ""
        #expect(line.contains("session.ended") && line.contains("access_revoked") && !line.contains("t1"), "\(line)")
        #expect(!channel.isActive, "the watch's connection is closed")
        watchers.tokensChanged(key, tokens)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "the watch is gone")
    }

    @Test("a bounded uid holds at most 64 watches (rate_limited with a sentence); root is not bound")
    func watchesPerUser() throws {
        let watchers = TokenWatchers()
        let sink = WatchSink(channel: EmbeddedChannel(), uid: 1000, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let key = SessionKey(uid: 1000, provider: ProviderID("mock")!, name: .default)
        let caller = PeerCredentials(pid: 1, uid: 1000, gid: 1000)
        let ids = try (0..<TokenWatchers.maximumPerUser).map { _ in try watchers.add(key, sink: sink, caller: caller, bounded: true) }
        #expect(throws: AuthGateError.self) { try watchers.add(key, sink: sink, caller: caller, bounded: true) }
        do {
            _ = try watchers.add(key, sink: sink, caller: caller, bounded: true)
        } catch {
            #expect(error.reason == .rateLimited && error.message.contains("64 token watches"))
        }
        watchers.remove(key, id: ids[0])
        #expect((try? watchers.add(key, sink: sink, caller: caller, bounded: true)) != nil, "a closed watch frees its place")
        let root = SessionKey(uid: 0, provider: ProviderID("mock")!, name: .default)
        for _ in 0..<100 { _ = try watchers.add(root, sink: sink, caller: PeerCredentials(pid: 1, uid: 0, gid: 0), bounded: false) }
    }
}
