import AuthGateCore
import AuthGateOAuth
import Logging
import ServiceLifecycle

/// Checks every remote provider's endpoints over the network, all at once, and keeps
/// retrying the unreachable ones with capped exponential backoff and jitter until they answer.
struct ProviderValidator: Service, CustomStringConvertible {
    let registry: ProviderRegistry
    let logger: Logger
    /// First retry delay; doubles up to each provider's `refresh.max_backoff_seconds`.
    var initialBackoff: Duration = .seconds(1)

    var description: String { "ProviderValidator" }

    func run() async throws {
        let providers = await registry.remoteProviders
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                for (id, remote) in providers {
                    group.addTask { await keepChecking(id, remote) }
                }
            }
        }
    }

    /// Validates one provider, then again after each backoff while it is unreachable.
    private func keepChecking(_ id: String, _ remote: RemoteIdentityProvider) async {
        let cap = Duration.seconds(remote.configuration.refresh.maxBackoffSeconds)
        var delay = initialBackoff
        while !Task.isCancelled {
            let validation = await remote.validate()
            guard !Task.isCancelled else { return }
            await registry.record(validation, for: id)
            Self.log(validation, id: id, logger: logger)
            guard validation.outcome == .unreachable else { return }
            // Full jitter (half to all of the delay) so that many daemons do not retry in step.
            let jittered = delay * Double.random(in: 0.5...1.0)
            do {
                try await Task.sleep(for: jittered)
            } catch {
                return  // shutdown
            }
            delay = min(delay * 2, cap)
        }
    }

    static func log(_ validation: ProviderValidation, id: String, logger: Logger) {
        for warning in validation.warnings {
            logger.warning("\(warning)", metadata: ["provider.id": "\(id)"])
        }
        switch validation.outcome {
        case .ready:
            logger.info("provider ready", metadata: ["provider.id": "\(id)"])
        case .unreachable:
            logger.warning("provider unreachable; retrying", metadata: ["provider.id": "\(id)", "reason": "\(validation.reason ?? "")"])
        case .invalid:
            logger.error("provider invalid", metadata: ["provider.id": "\(id)", "reason": "\(validation.reason ?? "")"])
        }
    }
}
