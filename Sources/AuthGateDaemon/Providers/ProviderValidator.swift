import AuthGateCore
import AuthGateOAuth
import Logging
import ServiceLifecycle

/// Checks every remote provider's endpoints over the network, all at once, and keeps
/// retrying the unreachable ones with capped exponential backoff and jitter until they answer.
///
/// It runs until shutdown: a reload hands it the providers it found unreachable
/// (``retryInBackground(_:_:)``), and a provider replaced by a reload stops being checked.
final class ProviderValidator: Service, CustomStringConvertible, Sendable {
    let registry: ProviderRegistry
    let logger: Logger
    /// First retry delay; doubles up to each provider's `refresh.max_backoff_seconds`.
    let initialBackoff: Duration
    private let handedOver: AsyncStream<(String, RemoteIdentityProvider)>
    private let handOver: AsyncStream<(String, RemoteIdentityProvider)>.Continuation

    var description: String { "ProviderValidator" }

    init(registry: ProviderRegistry, logger: Logger, initialBackoff: Duration = .seconds(1)) {
        self.registry = registry
        self.logger = logger
        self.initialBackoff = initialBackoff
        (handedOver, handOver) = AsyncStream.makeStream(of: (String, RemoteIdentityProvider).self)
    }

    /// Keeps checking a provider a reload found unreachable, starting after the first backoff.
    func retryInBackground(_ id: String, _ remote: RemoteIdentityProvider) {
        handOver.yield((id, remote))
    }

    func run() async throws {
        let providers = await registry.remoteProviders
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                for (id, remote) in providers {
                    group.addTask { await self.keepChecking(id, remote, checkFirst: true) }
                }
                for await (id, remote) in self.handedOver {
                    group.addTask { await self.keepChecking(id, remote, checkFirst: false) }
                }
            }
        }
    }

    /// Validates one provider, then again after each backoff while it is unreachable. At
    /// start-up a provider with `refresh.first_use_spread_seconds` is first checked after a
    /// random part of that window (as its first sign-ins wait: ``FirstUseSignIns``).
    private func keepChecking(_ id: String, _ remote: RemoteIdentityProvider, checkFirst: Bool) async {
        let cap = Duration.seconds(remote.configuration.refresh.maxBackoffSeconds)
        var delay = initialBackoff
        var check = checkFirst
        if checkFirst, case let spread = remote.configuration.refresh.firstUseWait(sinceStart: 0, random: Double.random(in: 0..<1)), spread > 0 {
            // Said, so that an admin who finds the provider unchecked knows why and for how long.
            logger.info(
                "provider checked after a random wait (refresh.first_use_spread_seconds)",
                metadata: ["provider.id": "\(id)", "seconds": "\((spread * 10).rounded() / 10)"]
            )
            do {
                try await Task.sleep(for: .seconds(spread))
            } catch {
                return  // shutdown
            }
        }
        while !Task.isCancelled {
            if check {
                let validation = await remote.validate()
                guard !Task.isCancelled, await registry.record(validation, for: id, remote: remote) else { return }
                Self.log(validation, id: id, logger: logger)
                guard validation.outcome == .unreachable else { return }
            }
            check = true
            // Equal jitter (half of the delay, plus up to the other half at random) so that many
            // daemons do not retry in step.
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
