package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// This checkout's root, where scripts/, docs/ and Tests/idp are.
package enum Repository {
    package static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// What a finished process left behind.
package struct ProcessOutput: Sendable {
    package var status: Int32
    package var stdout: String
    package var stderr: String

    package init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

/// Runs an executable to completion, feeding `stdin`.
package func run(
    _ executable: URL,
    _ arguments: [String],
    stdin: String? = nil,
    environment: [String: String] = [:],
    prefix: [String] = []
) throws -> ProcessOutput {
    let process = Process()
    if prefix.isEmpty {
        process.executableURL = executable
        process.arguments = arguments
    } else {
        process.executableURL = URL(fileURLWithPath: prefix[0])
        process.arguments = Array(prefix.dropFirst()) + [executable.path] + arguments
    }
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    let output = Pipe()
    let error = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardError = error
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    // Read both pipes to the end before waiting, so a chatty process cannot block on a full pipe.
    let collected = Mutex(Data())
    let readerDone = DispatchSemaphore(value: 0)
    Thread {
        let data = error.fileHandleForReading.readDataToEndOfFile()
        collected.withLock { $0 = data }
        readerDone.signal()
    }.start()
    let stdoutData = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    readerDone.wait()
    return ProcessOutput(
        status: process.terminationStatus,
        stdout: String(decoding: stdoutData, as: UTF8.self),
        stderr: String(decoding: collected.withLock { $0 }, as: UTF8.self)
    )
}

/// A temporary directory with a short path (Unix socket paths must stay under 108 bytes).
package final class ScratchDirectory: Sendable {
    package let path: String

    package init() throws {
        var template = Array("/tmp/agt-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw POSIXError(.EIO) }
        path = String(cString: created)
    }

    package func write(_ name: String, _ contents: String) throws {
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path + "/" + name))
    }

    /// The names in the directory, sorted.
    package var entries: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Text appended from one thread and read from another (a child's output).
package final class SharedText: Sendable {
    private let value = Mutex(("", complete: false))
    package init() {}
    package var text: String { value.withLock { $0.0 } }
    /// Whether the pipe reached its end: everything the writer wrote is in ``text``.
    package var isComplete: Bool { value.withLock { $0.complete } }
    package func append(_ data: Data) { value.withLock { $0.0 += String(decoding: data, as: UTF8.self) } }
    package func complete() { value.withLock { $0.complete = true } }
}

/// Collects everything `handle` delivers into `text`.
package func collect(_ handle: FileHandle, into text: SharedText) {
    handle.readabilityHandler = { handle in
        let data = handle.availableData
        if data.isEmpty {
            handle.readabilityHandler = nil
            text.complete()
        } else {
            text.append(data)
        }
    }
}

package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// A clock and a random source the tests set by hand: nothing here sleeps.
package final class ManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    private let randomValue = Mutex(0.0)
    package init() {}
    package var now: Date { current.withLock { $0 } }
    package func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    package func set(_ date: Date) { current.withLock { $0 = max($0, date) } }
    package var random: Double { randomValue.withLock { $0 } }
    package func setRandom(_ value: Double) { randomValue.withLock { $0 = value } }
}
