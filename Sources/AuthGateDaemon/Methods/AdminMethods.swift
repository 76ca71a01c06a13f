import AuthGateCore
import AuthGateOAuth
import AuthGateRPC
import AuthGateServer
import FoundationEssentials
import Logging
import NIOPosix

/// The administrators' methods on the daemon itself: `config.reload`, `metrics` and
/// `storage.rekey` (``AdminCheck``).
struct AdminMethods: Sendable {
    let admin: AdminCheck
    let reloader: ProviderReloader
    /// What the `metrics` method answers with; `nil` where the daemon has no metrics.
    var exposition: MetricsExposition?
    /// The session store and its key; `nil` in tests that run without one.
    var persistence: SessionPersistence?
    let logger: Logger

    /// Admins only: reads `providers.d` again and answers with the per-provider report.
    func configReload(from caller: MethodCaller) async throws(AuthGateError) -> [ProviderReloadReport] {
        try admin.require("reload the providers", of: caller)
        logger.notice("reload requested", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        return try await reloader.reload().map(ProviderReloadReport.init)
    }

    /// Administrators only: the metrics as Prometheus's text exposition.
    func metrics(from caller: MethodCaller) async throws(AuthGateError) -> MetricsResult {
        try admin.require("read the metrics", of: caller)
        guard let exposition = exposition else { throw AuthGateError(.methodNotFound, "This daemon keeps no metrics (it runs with --no-metrics).") }
        return MetricsResult(contentType: MetricsExposition.contentType, text: await exposition.text())
    }

    /// Administrators only: every sessions file sealed again under a new storage key, which
    /// then replaces the old one where it lives (``SessionPersistence/rekey()``).
    func storageRekey(from caller: MethodCaller) async throws(AuthGateError) -> StorageRekeyResult {
        try admin.require("change the storage key", of: caller)
        guard let persistence = persistence else { throw AuthGateError(.storageUnavailable, "This daemon has no session store.") }
        logger.notice("rekey requested", metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)"])
        // Child processes, fsyncs and the store's lock: off the event loops and the actors' threads.
        let outcome: Result<SessionPersistence.RekeyOutcome, StorageError>
        do {
            outcome = try await NIOThreadPool.singleton.runIfActive { () -> Result<SessionPersistence.RekeyOutcome, StorageError> in
                do throws(StorageError) { return .success(try persistence.rekey()) } catch { return .failure(error) }
            }
        } catch {
            throw AuthGateError(.serviceUnavailable, "authgated is stopping.")
        }
        switch outcome {
        case .success(let done):
            return StorageRekeyResult(
                storageKey: done.location.kind,
                files: done.report.files,
                sessions: done.report.sessions,
                unreadableFiles: done.report.unreadable.count
            )
        case .failure(let failure):
            logger.error("rekey failed: \(failure)")
            throw AuthGateError(.storageUnavailable, failure.message)
        }
    }
}
