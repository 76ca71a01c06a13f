import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What one load run measured.
struct LoadResult: Decodable {
    var requests: Int
    var errors: Int
    var requestsPerSecond: Double
    var p50: Double
    var p99: Double
    /// The load generator's own CPU time per request, in microseconds: its ceiling on this
    /// machine is the cores it may use divided by this.
    var generatorCPUPerRequest: Double

    enum CodingKeys: String, CodingKey {
        case requests, errors
        case requestsPerSecond = "requests_per_second"
        case p50 = "p50_us"
        case p99 = "p99_us"
        case generatorCPUPerRequest = "cpu_us_per_request"
    }
}

/// Drives a Unix-socket line server with `bench/load.c`: `clients` closed loops, each sending
/// one request line and waiting for its answer, again and again, for `duration`, all on one
/// thread with epoll, so that the generator costs the two cores as little as it can (a
/// thread per client cost it 26–29 µs per request; this costs ~4).
struct LoadGenerator {
    enum Mode: String {
        /// Connect, send one request, read its answer, close.
        case connectionPerRequest = "connection per request"
        /// One connection per client for the whole run.
        case keepAlive = "keep-alive"

        var argument: String { self == .keepAlive ? "keep-alive" : "per-request" }
    }

    /// The compiled `bench/load.c`.
    let program: String
    let socketPath: String
    let requestLine: String

    func run(clients: Int, mode: Mode, duration: Double) throws -> LoadResult {
        let output = try runProgram(
            program,
            [
                "--socket", socketPath, "--request", requestLine, "--clients", "\(clients)",
                "--mode", mode.argument, "--seconds", "\(duration)",
            ]
        )
        do {
            return try JSONDecoder().decode(LoadResult.self, from: Data(output.utf8))
        } catch {
            throw BenchError("the load generator printed \(output)")
        }
    }
}

/// The floor: `bench/floor.c`, a single-threaded epoll server that answers every line with a
/// fixed line and does nothing else, measured by the same generator in the same run.
final class FloorServer {
    let socketPath: String
    private let process = Process()

    init(program: String, socketPath: String, answer: String) throws {
        self.socketPath = socketPath
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = [socketPath, answer]
        let ready = Pipe()
        process.standardOutput = ready
        try process.run()
        guard let line = try ready.fileHandleForReading.read(upToCount: 6), String(decoding: line, as: UTF8.self) == "ready\n" else {
            throw BenchError("the floor server did not start")
        }
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// Runs `program` with `arguments` and returns what it printed; throws when it fails.
/// - Parameter environment: Variables set for it besides the bench's own.
/// - Parameter quiet: Its stderr goes to /dev/null (a probe whose failure is an answer).
func runProgram(_ program: String, _ arguments: [String], environment: [String: String] = [:], quiet: Bool = false) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
    if quiet { process.standardError = FileHandle.nullDevice }
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw BenchError("\(program) failed (status \(process.terminationStatus))") }
    return String(decoding: data, as: UTF8.self)
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
