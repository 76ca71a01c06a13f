import AuthGateTestSupport
import Foundation
import Synchronization
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// The browser sign-in's loopback listener, on a real port: only the sign-in's user's
/// programs are served (the kernel's socket table says whose the other end is).
@Suite("The redirect listener of a browser sign-in")
struct RedirectListenerTests {
    /// Sends `request` to 127.0.0.1:`port` and reads until the listener closes (30 s at most:
    /// a test process starting hundreds of tests at once can leave the listener's task waiting
    /// for seconds, and a client that gave up would be an orphan socket the kernel names no
    /// owner of), on a thread of its own: a blocking read on one of the few threads Swift's
    /// tasks run on could keep the listener's own task from running.
    private static func exchange(port: Int, _ request: String) async throws -> String {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            Thread {
                continuation.resume(
                    with: Result {
                        let connection = try RawConnection(port: port, timeout: 30)
                        connection.send(request)
                        return connection.read { _ in false }
                    }
                )
            }.start()
        }
    }

    @Test(
        "a connection from another user's program is closed unread and reported, the sign-in stays pending; the sign-in's user's browser is answered and ends it"
    )
    func servesOnlyTheSignInsUser() async throws {
        let refusals = Mutex<[UInt32?]>([])
        // Bound for a uid that is not this process's: this test plays another user.
        let foreign = try await LoopbackRedirectListener.bind(nil, for: getuid() &+ 1)
        let port = try #require(foreign.redirectURI.port)
        let served = Task {
            await foreign.serve { uid in
                refusals.withLock { $0.append(uid) }
            } handle: { query in
                (RedirectPage.signedIn(provider: "corp"), query["code"])
            }
        }
        let refused = try await Self.exchange(port: port, "GET /callback?code=attackers-code&state=s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(refused.isEmpty, "no answer to another user: \(refused)")
        #expect(refusals.withLock { $0 } == [getuid()])
        served.cancel()
        #expect(await served.value == nil, "the sign-in did not take the other user's code")

        let own = try await LoopbackRedirectListener.bind(nil, for: getuid())
        let ownPort = try #require(own.redirectURI.port)
        let ownServed = Task {
            await own.serve { _ in
                Issue.record("the sign-in's own user refused")
            } handle: { query in
                (RedirectPage.signedIn(provider: "corp"), query["code"])
            }
        }
        let answered = try await Self.exchange(port: ownPort, "GET /callback?code=the-code&state=s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(answered.hasPrefix("HTTP/1.1 200"), "\(answered.prefix(200))")
        // The outcome is kept before the page is written: cancelled now, the serve returns it
        // (and a broken listener fails here instead of waiting for ever).
        ownServed.cancel()
        #expect(await ownServed.value == "the-code")
    }

    @Test("a code the provider takes longer than the 2 s request deadline to redeem still gets the browser its page")
    func slowRedemptionStillAnswered() async throws {
        let listener = try await LoopbackRedirectListener.bind(nil, for: getuid())
        let port = try #require(listener.redirectURI.port)
        let served = Task {
            await listener.serve { _ in
            } handle: { query in
                try? await Task.sleep(for: .milliseconds(2_500))
                return (RedirectPage.signedIn(provider: "corp"), query["code"])
            }
        }
        let answered = try await Self.exchange(port: port, "GET /callback?code=slow&state=s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(answered.hasPrefix("HTTP/1.1 200"), "\(answered.prefix(200))")
        served.cancel()
        #expect(await served.value == "slow")
    }
}
