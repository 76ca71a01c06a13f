import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `provider add` and `remove`'s steps (ProviderFileChange) in process, against a daemon of one
/// answer per method; the built CLI runs them against a real daemon in ProviderFileCommandTests.
@Suite("provider add and remove: the files and the daemon's reload")
struct ProviderFileChangeTests {
    private static func reload(_ reports: [ProviderReloadReport], id: String) -> String {
        DaemonAnswers.result(reports, id: id)
    }

    @Test("a name that is not a provider id is refused with the rule (status 5)")
    func providerID() {
        #expect(throws: Never.self) { try ProviderFileChange.id("corp-2") }
        let refused = #expect(throws: ToolFailure.self) { try ProviderFileChange.id("../etc") }
        #expect(refused?.status == ToolFailure.inputRefused && refused?.description.contains("[provider_file.invalid]") == true)
    }

    @Test("remove: the file goes, and the reload must show the provider gone; a daemon that still has it reads another directory (status 5)")
    func remove() throws {
        let scratch = try ScratchDirectory()
        let id = try #require(ProviderID("corp"))
        let file = ProviderFileStore.path(id: "corp", directory: scratch.path)
        try Data("{}".utf8).write(to: URL(fileURLWithPath: file))
        let gone = try StandInDaemon(in: scratch.path) { _, requestID in Self.reload([], id: requestID) }
        try ProviderFileChange(id: id, directory: scratch.path, force: false, daemon: DaemonConnection(socket: gone.path)).remove()
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(gone.requestText.contains(#""method":"config.reload""#))

        try FileManager.default.removeItem(atPath: gone.path)
        try Data("{}".utf8).write(to: URL(fileURLWithPath: file))
        let stillThere = try StandInDaemon(in: scratch.path) { method, requestID in
            method == "daemon.info"
                ? DaemonAnswers.error(.internalError, "no", id: requestID)
                : Self.reload(
                    [ProviderReloadReport(id: "corp", file: file, change: .unchanged, status: .ready, statusReason: nil, problems: [], warnings: [])],
                    id: requestID
                )
        }
        let failure = #expect(throws: ToolFailure.self) {
            try ProviderFileChange(id: id, directory: scratch.path, force: false, daemon: DaemonConnection(socket: stillThere.path)).remove()
        }
        #expect(failure?.status == ToolFailure.inputRefused && failure?.description.contains("[provider_file.not_loaded]") == true)
    }

    @Test("add: a file the daemon's rules refuse is not written, with each problem, and the daemon is not asked")
    func invalidDraft() throws {
        let scratch = try ScratchDirectory()
        let id = try #require(ProviderID("corp"))
        var draft = ProviderFileDraft()
        draft.grants = [.password]
        let failure = #expect(throws: ToolFailure.self) {
            try ProviderFileChange(id: id, directory: scratch.path, force: false, daemon: DaemonConnection(socket: scratch.path + "/none.sock"))
                .add(draft, registration: nil, dryRun: false)
        }
        #expect(failure?.status == ToolFailure.inputRefused && failure?.description.hasPrefix("The file would be invalid; nothing was written.") == true)
        #expect(!FileManager.default.fileExists(atPath: ProviderFileStore.path(id: "corp", directory: scratch.path)))
    }
}
