import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthGateDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Input from another process — a socket client, a provider — that tries to forge log records,
/// drive the user's terminal or trap a parser: each is refused or made harmless.
@Suite("Hostile input: log records, terminals, numbers", .serialized)
struct HostileInputTests {
    /// Control bytes a terminal acts on: ESC, BEL, CR, and C1's CSI in UTF-8.
    private static func hasTerminalControls(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.isUnsafeControl && $0 != "\n" }
    }

    // MARK: Log injection

    @Test("a resource with CR LF is invalid_params, and no client string forges a log record")
    func logInjection() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock], logLevel: "trace")
        let connection = try daemon.connect()
        _ = try exchange(connection, Providers.mockLogin)
        for resource in [
            #"x\r\n<0>emerg forged"#, #"https://api.example.com/\u0000"#, "https://api.example.com/a b", "https://api.example.com/#frag",
            "https://ä.example.com/", "relative/path",
        ] {
            let reply = try exchange(connection, #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock","resource":"\#(resource)"}}"#)
            #expect(reply.errorReason == "invalid_params", "\(resource): \(reply)")
        }
        let fine = try exchange(
            connection,
            #"{"jsonrpc":"2.0","id":2,"method":"token","params":{"provider":"mock","resource":"https://api.example.com/v1?x=%41"}}"#
        )
        #expect(fine.errorReason != "invalid_params", "\(fine)")
        // A method name is logged at debug level: its CR LF must not start a record of its own.
        _ = try exchange(connection, #"{"jsonrpc":"2.0","id":3,"method":"x\r\n<0>emerg forged method\u2028\u009b"}"#)
        _ = try exchange(connection, #"{"jsonrpc":"2.0","id":4,"method":"daemon.info"}"#)
        let lines = daemon.logText.split(separator: "\n")
        #expect(!lines.contains { $0.hasPrefix("<0>") || $0.hasPrefix("emerg") }, "\(daemon.logText.suffix(2000))")
        #expect(!daemon.logText.unicodeScalars.contains { $0.isUnsafeControl && $0 != "\n" })
    }

    @Test("EscapingLogHandler escapes C0, CR, NUL, DEL, C1 and U+2028 in messages and every metadata value")
    func escapingLogHandler() {
        let captured = CapturedLog()
        var logger = Logger(label: "test") { _ in EscapingLogHandler(wrapping: CapturingHandler(log: captured)) }
        logger.logLevel = .trace
        logger[metadataKey: "handler"] = "a\rb"
        logger.info(
            "sub \("x\r\n<0>forged\u{0}")",
            metadata: [
                "plain": "ok", "kid": "\u{1B}]0;title\u{7}", "nested": .dictionary(["c1": "\u{9B}2J", "list": .array(["\u{2028}", "\u{7F}"])]),
                "convertible": .stringConvertible(ControlDescription()),
            ]
        )
        let (message, metadata) = captured.last
        #expect(message == #"sub x\u{D}\u{A}<0>forged\u{0}"#)
        #expect(metadata["plain"] == "ok")
        #expect(metadata["kid"] == #"\u{1B}]0;title\u{7}"#)
        #expect(metadata["nested"] == .dictionary(["c1": #"\u{9B}2J"#, "list": .array([#"\u{2028}"#, #"\u{7F}"#])]))
        #expect(metadata["convertible"] == #"line\u{A}two"#)
        #expect(logger[metadataKey: "handler"] == #"a\u{D}b"#)
        #expect("Zoë 日本 🙂".escapingControlCharacters == "Zoë 日本 🙂")
    }
    // MARK: Terminal injection

    @Test("a provider's error_description and user_code cannot drive the user's terminal")
    func terminalInjection() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "escape_error")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProviderFile(server, grants: #"["password", "device_code"]"#)])
        try daemon.waitForLog("provider ready")
        let login = try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n")
        #expect(login.status != 0)
        #expect(login.stderr.contains("faulty") && !Self.hasTerminalControls(login.stderr), "\(login.stderr.debugDescription)")

        try server.setMode("escape_user_code")
        let device = try daemon.cli(["login", "faulty", "--device", "--no-qr"])
        #expect(device.status == 7, "\(device.stderr)")
        #expect(device.stderr.contains("[server_error]") && device.stderr.contains("user_code"), "\(device.stderr)")
        #expect(!Self.hasTerminalControls(device.stderr + device.stdout))
        #expect(!daemon.logText.unicodeScalars.contains { $0.isUnsafeControl && $0 != "\n" })
    }
    // MARK: Small ones

    @Test("userinfo prints a claim of 1e300 instead of trapping")
    func userinfoHugeNumber() throws {
        let scratch = try ScratchDirectory()
        let server = try LoopbackServer.faulty(workdir: scratch.path, mode: "ok")
        let daemon = try DaemonProcess(providers: ["faulty.json": faultyProviderFile(server)])
        try daemon.waitForLog("provider ready")
        #expect(try daemon.cli(["login", "faulty", "--username", "alice", "--password-stdin"], stdin: "alice-password-1\n").status == 0)
        let userinfo = try daemon.cli(["userinfo", "faulty"])
        #expect(userinfo.status == 0, "\(userinfo.stderr)")
        #expect(userinfo.stdout.contains("huge_number") && userinfo.stdout.contains("e+300"), "\(userinfo.stdout)")
    }
}

/// What ``CapturingHandler`` saw last.
private final class CapturedLog: Sendable {
    private let entries = Mutex<[(String, Logger.Metadata)]>([])
    func append(_ message: String, _ metadata: Logger.Metadata) { entries.withLock { $0.append((message, metadata)) } }
    var last: (String, Logger.Metadata) { entries.withLock { $0.last ?? ("", [:]) } }
}

private struct CapturingHandler: LogHandler {
    let log: CapturedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        log.append(event.message.description, metadata.merging(event.metadata ?? [:]) { _, new in new })
    }
}

private struct ControlDescription: CustomStringConvertible, Sendable {
    var description: String { "line\ntwo" }
}
