import ServiceLifecycle

/// Forgets finished sign-in flows now and then, and cancels the pending ones (closing their
/// redirect listeners) as soon as the daemon starts to stop, with the notifications still
/// waiting for their "Sign in" action (``SignInNotifier``) and the first-use sign-ins under
/// way (``FirstUseSignIns``).
struct LoginFlowService: Service, CustomStringConvertible {
    let flows: LoginFlowManager
    var firstUse: FirstUseSignIns? = nil
    var notifier: SignInNotifier? = nil
    /// Its questions still waiting are stopped too (their callers denied).
    var consent: ConsentKeeper? = nil
    var description: String { "LoginFlowService" }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: .seconds(10))
                } catch {
                    return
                }
                await flows.purge()
            }
        }
        await notifier?.shutdown()
        await consent?.shutdown()
        await firstUse?.shutdown()
        await flows.shutdown()
    }
}
