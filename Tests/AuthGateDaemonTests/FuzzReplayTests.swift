import AuthGateFuzzing
import AuthGateTestSupport
import Foundation
import Testing

/// Every committed fuzzing input, seeds and crashes alike (Tests/Fuzz/TARGET/{corpus,crashes}),
/// run through its target as `scripts/fuzz` does: a crash found once stays fixed.
@Suite("Fuzz inputs replayed")
struct FuzzReplayTests {
    static let root = Repository.root.appendingPathComponent("Tests/Fuzz")

    static func inputs(_ target: FuzzTarget) -> [URL] {
        ["corpus", "crashes"].flatMap { folder in
            let directory = root.appendingPathComponent(target.rawValue).appendingPathComponent(folder)
            return ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
                .filter { !$0.lastPathComponent.hasPrefix(".") }
        }
    }

    @Test("each target has seeds, and every committed input runs to an answer", arguments: FuzzTarget.allCases)
    func replay(_ target: FuzzTarget) async throws {
        let inputs = Self.inputs(target)
        #expect(!inputs.isEmpty, "Tests/Fuzz/\(target.rawValue)/corpus has no seeds")
        let contents = try inputs.map { Array(try Data(contentsOf: $0)) }
        // On a thread of its own, as in the fuzzer: a target blocks until its async parts end,
        // which must not hold one of the cooperative pool's few threads.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                for bytes in contents { target.run(bytes) }
                done.resume()
            }.start()
        }
    }

    @Test(
        "scripts/fuzz names an unknown target and lists the valid ones (usage error, no crash folder made); --help and --list answer; its list is FuzzTarget's"
    )
    func scriptRefusesUnknownTargets() throws {
        let script = Repository.root.appendingPathComponent("scripts/fuzz").path
        let unknown = try run(URL(fileURLWithPath: "/bin/bash"), [script, "no-such-target", "1"])
        #expect(
            unknown.status == 64 && unknown.stderr.contains("no fuzz target \"no-such-target\"") && unknown.stderr.contains("rpc-line"),
            "\(unknown.stderr)"
        )
        #expect(!unknown.stderr.contains("found a crash"))
        #expect(!FileManager.default.fileExists(atPath: Self.root.appendingPathComponent("no-such-target").path))
        #expect(try run(URL(fileURLWithPath: "/bin/bash"), [script, "rpc-line", "soon"]).status == 64)
        let help = try run(URL(fileURLWithPath: "/bin/bash"), [script, "--help"])
        #expect(help.status == 0 && help.stdout.contains("scripts/fuzz --list"))
        let list = try run(URL(fileURLWithPath: "/bin/bash"), [script, "--list"]).stdout.split(separator: "\n").map(String.init)
        #expect(Set(list) == Set(FuzzTarget.allCases.map(\.rawValue)))
    }
}
