import AuthGateRPC
import AuthGateTestSupport
import CLinux
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import AuthGateServer

#if canImport(Glibc)
import Glibc
#endif

private let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// The front door's decisions (ConnectionTable) in process, under times the tests give, and
/// the one owner of a connection (ClientConnection); then the front door's system calls through
/// a real socket.
@Suite("Front door: connection table")
struct ConnectionTableTests {
    static let second: UInt64 = 1_000_000_000
    let limits = ConnectionLimits(maximumConnections: 8, idleTimeout: .seconds(300), firstByteTimeout: .seconds(2))
    let connections = OpenConnections()

    /// A connection of `uid` on a descriptor the table never closes (its steps only say what to do).
    private func connection(_ descriptor: Int32, uid: UInt32 = 1000) -> ClientConnection {
        ClientConnection(descriptor: descriptor, caller: PeerCredentials(pid: 1, uid: uid, gid: uid), admission: .admitted, connections: connections)
    }

    private func read(_ table: inout ConnectionTable, _ text: String, on descriptor: Int32, capacity: Int = 16 * 1024, at now: UInt64) -> ConnectionTable.Step {
        Array(text.utf8).withUnsafeBytes { table.read($0, on: descriptor, capacity: capacity, now: now) }
    }

    @Test("one complete line per read is answered and the connection stays; the line ending is not part of the line")
    func oneLine() {
        var table = ConnectionTable(limits: limits)
        table.serve(connection(7), now: 0)
        guard case .answer(let line, let uid) = read(&table, "{\"id\":1}\n", on: 7, at: 1) else {
            Issue.record("not answered")
            return
        }
        #expect(line == 0..<8 && uid == 1000)
        guard case .wait = table.answered(7, .all) else {
            Issue.record("the connection should stay")
            return
        }
        guard case .answer(let crlf, _) = read(&table, "{\"id\":2}\r\n", on: 7, at: 2) else {
            Issue.record("not answered")
            return
        }
        #expect(crlf == 0..<8)
        #expect(table.count == 1)
    }

    @Test("two lines in one read, a split line and a full buffer are handed on with every byte read")
    func handedOnWithTheBytes() {
        for (text, capacity) in [("{\"id\":1}\n{\"id\":2}\n", 1024), ("{\"id\":1", 1024), ("{\"id\":12345}\n", 13)] {
            var table = ConnectionTable(limits: limits)
            table.serve(connection(9), now: 0)
            guard case .handOn(let handOff) = read(&table, text, on: 9, capacity: capacity, at: 5) else {
                Issue.record("\(text.debugDescription) should be handed on")
                continue
            }
            #expect(handOff.unread == Array(text.utf8) && handOff.unwritten.isEmpty && handOff.bytesArrived)
            #expect(handOff.connection.descriptor == 9 && table.count == 0, "no longer the front door's")
        }
    }

    @Test("a line the cache cannot answer is handed on with its bytes; an answer sent in part hands on the rest")
    func unansweredAndPartial() {
        var table = ConnectionTable(limits: limits)
        table.serve(connection(3), now: 0)
        table.serve(connection(4), now: 0)
        let line = Array("{\"id\":1}\n".utf8)
        _ = line.withUnsafeBytes { table.read($0, on: 3, capacity: 1024, now: 1) }
        guard case .handOn(let unanswered) = line.withUnsafeBytes({ table.unanswered($0, on: 3) }) else {
            Issue.record("not handed on")
            return
        }
        #expect(unanswered.unread == line && unanswered.unwritten.isEmpty)

        _ = line.withUnsafeBytes { table.read($0, on: 4, capacity: 1024, now: 1) }
        guard case .handOn(let partial) = table.answered(4, .part([7, 8, 9])) else {
            Issue.record("not handed on")
            return
        }
        #expect(partial.unwritten == [7, 8, 9] && partial.unread.isEmpty && partial.bytesArrived)
        #expect(table.count == 0)
    }

    @Test("a client that closed, or a failed send, closes the connection")
    func closed() {
        var table = ConnectionTable(limits: limits)
        table.serve(connection(5), now: 0)
        table.serve(connection(6), now: 0)
        guard case .close(let gone) = read(&table, "", on: 5, at: 1) else {
            Issue.record("not closed")
            return
        }
        #expect(gone.descriptor == 5)
        _ = read(&table, "{}\n", on: 6, at: 1)
        guard case .close(let failed) = table.answered(6, .failed) else {
            Issue.record("not closed")
            return
        }
        #expect(failed.descriptor == 6 && table.count == 0)
        guard case .wait = read(&table, "{}\n", on: 6, at: 2) else {
            Issue.record("a descriptor no longer here is ignored")
            return
        }
    }

    @Test("no byte within the first-byte timeout, or nothing within the idle timeout of the last answer: closed, with which")
    func deadlines() {
        var table = ConnectionTable(limits: limits)
        table.serve(connection(10), now: 0)
        table.serve(connection(11), now: 0)
        #expect(table.nextCheck == 2 * Self.second)
        _ = read(&table, "{}\n", on: 11, at: Self.second)
        _ = table.answered(11, .all)

        #expect(table.expire(now: 2 * Self.second - 1).connections.isEmpty)
        let first = table.expire(now: 2 * Self.second).connections
        #expect(first.map(\.0.descriptor) == [10] && first.map(\.1) == [.firstByte])
        #expect(table.nextCheck == 301 * Self.second, "the next deadline: the idle one of the connection that asked")

        #expect(table.expire(now: 301 * Self.second - 1).connections.isEmpty)
        let idle = table.expire(now: 301 * Self.second).connections
        #expect(idle.map(\.0.descriptor) == [11] && idle.map(\.1) == [.idle])
        #expect(table.nextCheck == .max && table.count == 0)
        #expect(ConnectionDeadline.firstByte.reason(limits) == "nothing arrived within 2.0 seconds of connecting")
    }

    @Test("out of descriptors: accepting pauses, then resumes by itself")
    func acceptPause() {
        var table = ConnectionTable(limits: limits)
        table.acceptingFailed(now: 5)
        #expect(table.acceptingPausedUntil == 5 + ConnectionTable.acceptPause && table.nextCheck == 5 + ConnectionTable.acceptPause)
        #expect(!table.expire(now: 5 + ConnectionTable.acceptPause - 1).resumeAccepting)
        #expect(table.expire(now: 5 + ConnectionTable.acceptPause).resumeAccepting)
        #expect(table.acceptingPausedUntil == nil && table.nextCheck == .max)
    }

    // MARK: The one owner of a connection

    private func socketPair() -> (Int32, Int32) {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        return (pair[0], pair[1])
    }

    private func isOpen(_ descriptor: Int32) -> Bool { fcntl(descriptor, F_GETFD) != -1 }

    @Test("a uid's share and the limit; a place is given back once, by close or by the adopting channel's close, never twice")
    func placesGivenBackOnce() {
        let share = limits.perUserShare
        #expect(share == 2)
        #expect(connections.reserve(uid: 1000, limit: 8, share: share) == .admitted)
        #expect(connections.reserve(uid: 1000, limit: 8, share: share) == .admitted)
        #expect(connections.reserve(uid: 1000, limit: 8, share: share) == .tooManyOfOneUser)
        #expect(connections.reserve(uid: 1001, limit: 3, share: share) == .admitted)
        #expect(connections.reserve(uid: 1002, limit: 3, share: share) == .tooManyInAll)
        #expect(connections.count == 3)

        let (mine, peer) = socketPair()
        let closed = ClientConnection(descriptor: mine, caller: PeerCredentials(pid: 1, uid: 1000, gid: 1000), admission: .admitted, connections: connections)
        closed.close()
        closed.close()
        #expect(!isOpen(mine) && closed.isClosed && !closed.adopt())
        #expect(connections.count == 2, "given back once")

        let (theirs, other) = socketPair()
        let adopted = ClientConnection(
            descriptor: theirs,
            caller: PeerCredentials(pid: 1, uid: 1000, gid: 1000),
            admission: .admitted,
            connections: connections
        )
        #expect(adopted.adopt())
        adopted.close()
        #expect(isOpen(theirs) && connections.count == 2, "the channel owns the descriptor: close does nothing")
        adopted.channelClosed()
        adopted.channelClosed()
        #expect(connections.count == 1 && adopted.isClosed)
        #expect(connections.reserve(uid: 1000, limit: 8, share: share) == .admitted, "the share is free again")

        let refused = ClientConnection(
            descriptor: other,
            caller: PeerCredentials(pid: 1, uid: 1002, gid: 1002),
            admission: .tooManyInAll,
            connections: connections
        )
        refused.close()
        #expect(connections.count == 2, "a connection over the limits held no place")
        for descriptor in [peer, theirs] { close(descriptor) }
    }

    @Test("stopping with connections open closes every one and gives every place back")
    func stopWithConnectionsOpen() {
        var table = ConnectionTable(limits: limits)
        var peers: [Int32] = []
        for _ in 0..<3 {
            let (mine, peer) = socketPair()
            peers.append(peer)
            _ = connections.reserve(uid: 1000, limit: 8, share: nil)
            table.serve(
                ClientConnection(
                    descriptor: mine,
                    caller: PeerCredentials(pid: 1, uid: 1000, gid: 1000),
                    admission: .admitted,
                    connections: connections
                ),
                now: 0
            )
        }
        #expect(connections.count == 3 && table.count == 3)
        let removed = table.removeAll()
        for connection in removed { connection.close() }
        #expect(removed.count == 3 && table.count == 0 && connections.count == 0)
        #expect(removed.allSatisfy { !isOpen($0.descriptor) })
        for peer in peers { close(peer) }
    }

    // MARK: Through a real socket

    @Test("an answer the socket takes only in part is handed on with exactly the bytes it did not take")
    func partialSendThroughASocket() async throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/door.sock"
        let listener = Array(path.utf8).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { ag_bind_unix($0.baseAddress, $0.count, Int32(SOCK_STREAM.rawValue), 8) }
        }
        #expect(listener >= 0)
        // A token far larger than a Unix socket's buffers.
        let answers = OneTokenAnswers(token: String(repeating: "t", count: 2_000_000))
        let line = #"{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}"#
        let expected = Array(buffer: try #require(answers.answer(to: ByteBuffer(string: line), uid: getuid(), allocator: ByteBufferAllocator())))

        let handedOn = Mutex<FrontDoor.HandOff?>(nil)
        let door = try FrontDoor(
            listener: listener,
            limits: limits,
            connections: connections,
            answers: answers,
            logger: quiet,
            timeouts: .timeouts(logger: quiet)
        ) { handOff in handedOn.withLock { $0 = handOff } }
        // Started on an event loop, not the cooperative pool: under load, the pool's two
        // threads may be held by other tests' blocking waits for longer than this test waits.
        let serving = Task(executorPreference: EventLoopTaskExecutor(MultiThreadedEventLoopGroup.singleton.next())) { await door.run() }
        let client = Array(path.utf8).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { ag_connect_unix($0.baseAddress, $0.count) }
        }
        #expect(client >= 0)
        let request = Array((line + "\n").utf8)
        #expect(request.withUnsafeBytes { write(client, $0.baseAddress, $0.count) } == request.count)
        // Awaited, not blocked on: the door's thread starts from a task on the cooperative pool,
        // which other tests' blocked threads may hold for a while.
        try await until(timeout: .seconds(60)) { handedOn.withLock { $0 != nil } }
        let handOff = try #require(handedOn.withLock { $0 })
        #expect(handOff.unread.isEmpty && handOff.bytesArrived && !handOff.unwritten.isEmpty)

        // What the client can read now, then what NIO would write: the whole answer, once.
        var received: [UInt8] = []
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            received += chunk[0..<count]
        }
        #expect(received.count + handOff.unwritten.count == expected.count)
        #expect(received + handOff.unwritten == expected)
        #expect(connections.count == 1, "the handed-on connection keeps its place")
        handOff.connection.close()
        #expect(connections.count == 0)
        door.stop()
        await serving.value
        close(client)
    }
}

/// The daemon's cached answers reduced to one token: every plain `token` call is answered with
/// it, whoever asks (PlainTokenRequest reads the line, as the daemon's answers do).
private struct OneTokenAnswers: TokenAnswers {
    let token: String
    var generation: AnswerGeneration { AnswerGeneration(tokens: 1, providers: 1) }
    var currentTime: Date { Date() }
    var pinsProcesses: Bool { false }

    func lookUp<Answer>(
        _ line: UnsafeRawBufferPointer,
        uid: UInt32,
        _ write: (_ id: [UInt8], _ result: [UInt8]) -> Answer
    ) -> (answer: Answer, validUntil: Date, method: RPCMethod)? {
        guard let request = PlainTokenRequest(line), case .session = request.target else { return nil }
        return (write(request.id, Array(#"{"access_token":"\#(token)"}"#.utf8)), .distantFuture, .token)
    }

    func answeredAgain() {}
    func answered(_ method: RPCMethod, _ count: Int, eachWithin duration: Duration) {}
}
