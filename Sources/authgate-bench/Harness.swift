import AuthGateClient
import AuthGateCore
import AuthGateRPC
import CLinux
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A temporary directory with a short path (Unix socket paths must stay under 108 bytes).
final class WorkDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/agbench-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw BenchError("cannot create a temporary directory") }
        path = String(cString: created)
    }

    func write(_ name: String, _ contents: String) throws {
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path + "/" + name))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// The release `authgated` under measurement.
final class BenchDaemon {
    let socketPath: String
    let process = Process()

    /// Starts the daemon on the provider files in `providers` and, unless told otherwise, waits
    /// until its socket answers.
    /// - Parameter logFile: Where its log goes, at `notice`; without one it logs warnings to nowhere.
    /// - Parameter arguments: More of the daemon's options.
    init(
        binary: String,
        work: WorkDirectory,
        name: String,
        providers: [String: String],
        environment: [String: String] = [:],
        arguments: [String] = [],
        waitUntilServing: Bool = true,
        logFile: String? = nil
    ) throws {
        let directory = work.path + "/\(name).d"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (file, json) in providers {
            try Data(json.utf8).write(to: URL(fileURLWithPath: directory + "/" + file))
        }
        socketPath = work.path + "/\(name).sock"
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments =
            [
                "--user", "--providers", directory, "--socket", socketPath, "--state-dir", work.path + "/\(name)-state",
                "--log-level", logFile == nil ? "warning" : "notice",
            ] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        if let logFile {
            _ = FileManager.default.createFile(atPath: logFile, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: logFile)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        if waitUntilServing { try waitUntilServingSocket() }
    }

    var pid: Int32 { process.processIdentifier }

    func waitUntilServingSocket(timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while (try? client.callBlocking(.daemonInfo, EmptyResult(), as: DaemonInfo.self)) == nil {
            guard Date() < deadline, process.isRunning else { throw BenchError("authgated did not start serving \(socketPath)") }
            usleep(2_000)
        }
    }

    /// Resident set size in KiB, from /proc: all of it, and the anonymous part (heap and
    /// stacks, without the pages of the program and its libraries, which are shared).
    var residentKiB: (total: Int, anonymous: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (field("VmRSS"), field("RssAnon"))
    }

    /// The daemon's client, for the harness's own calls (the measured load is bench/load.c).
    var client: AuthGateClient { AuthGateClient(socketPath: socketPath) }

    /// Signs the demo user in to `provider`'s session `session` (its default session: `nil`).
    func signIn(provider: String = "mock", session: String? = nil) throws {
        let params = LoginParams(provider: provider, grant: nil, username: "demo", password: Secret("demo-password-1"), session: session)
        _ = try client.callBlocking(.login, params, as: LoginResult.self)
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// Runs `arguments` `runs` times in a row with posix_spawn (stdout to /dev/null) and returns
/// the wall time of each run, spawn to exit, in microseconds, sorted.
/// - Parameter stdin: A file each run reads as its stdin (a credential helper's request).
func timeProcesses(_ arguments: [String], environment: [String: String], runs: Int, stdin: String? = nil) throws -> [Double] {
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for item in argv { free(item) }
        for item in envp { free(item) }
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    if let stdin { posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0) }
    defer { posix_spawn_file_actions_destroy(&actions) }
    var times: [Double] = []
    for _ in 0..<runs {
        let began = DispatchTime.now().uptimeNanoseconds
        var pid: pid_t = 0
        guard posix_spawn(&pid, arguments[0], &actions, nil, argv, envp) == 0 else {
            throw BenchError("cannot run \(arguments[0])")
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        times.append(Double(DispatchTime.now().uptimeNanoseconds - began) / 1000)
        guard status == 0 else { throw BenchError("\(arguments.joined(separator: " ")) failed (wait status \(status))") }
    }
    return times.sorted()
}

/// A test provider of Tests/idp on loopback: the fault-injecting one (faulty.py), for the
/// start-up measurement, or the throttling one (throttled.py), for the fleet.
final class FaultyProvider {
    let issuer: String
    let caFile: String
    private let process = Process()

    convenience init(python: String, repository: String, work: WorkDirectory, name: String, mode: String, delay: Double? = nil) throws {
        try self.init(
            python: python,
            repository: repository,
            work: work,
            name: name,
            script: "faulty.py",
            arguments: ["--mode", mode] + (delay.map { ["--delay", "\($0)"] } ?? [])
        )
    }

    init(python: String, repository: String, work: WorkDirectory, name: String, script: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [repository + "/Tests/idp/" + script, "--workdir", work.path + "/" + name] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([UInt8(ascii: "\n")]) { break }
            line.append(byte)
        }
        guard let info = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
            let issuer = info["issuer"] as? String, let caFile = info["ca_file"] as? String
        else {
            throw BenchError("\(script) did not start (is the venv there? scripts/bench creates it)")
        }
        self.issuer = issuer
        self.caFile = caFile
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }
}

/// Receives sd_notify datagrams on a socket of its own.
final class NotifySocket {
    let path: String
    private let descriptor: Int32

    init(path: String) throws {
        self.path = path
        let bytes = Array(path.utf8)
        descriptor = bytes.withUnsafeBufferPointer { path in
            path.withMemoryRebound(to: CChar.self) { ag_bind_unix($0.baseAddress, $0.count, Int32(SOCK_DGRAM.rawValue), 0) }
        }
        guard descriptor >= 0 else { throw BenchError("cannot bind \(path)") }
    }

    deinit { close(descriptor) }

    /// Blocks until a message containing `text` arrives.
    func wait(for text: String) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0, String(decoding: buffer[..<count], as: UTF8.self).contains(text) { return }
        }
    }
}
