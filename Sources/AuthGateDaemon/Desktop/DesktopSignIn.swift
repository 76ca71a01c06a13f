import AuthGateCore
import AuthGateRPC
import AuthGateServer
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The "Sign in" action of a notification: the provider's browser sign-in (`login.begin` with
/// the authorization-code grant, as `authgate login` starts it), begun by the daemon for the
/// session's owner, its page opened with `xdg-open` on the user's desktop. The flow's loopback
/// listener finishes it and restores the session, with no terminal anywhere.
struct DesktopSignIn: InteractiveSignInStarter {
    let services: DaemonServices
    let desktop: DesktopSession

    /// The session's owner, as the daemon itself acts for it.
    private func owner(_ key: SessionKey) -> PeerCredentials {
        PeerCredentials(pid: getpid(), uid: key.uid, gid: AccessPolicy.primaryGroupID(uid: key.uid) ?? getegid())
    }

    func canStart(_ key: SessionKey) async -> Bool {
        guard desktop.program("xdg-open") != nil,
            let (configuration, _) = try? await services.registry.usableProvider(key.provider.rawValue, for: owner(key))
        else { return false }
        return configuration.grants.contains(.authorizationCode)
    }

    func start(_ key: SessionKey) async {
        let handlers = MethodHandlers(services: services, caller: owner(key))
        let metadata = key.logMetadata()
        let begun: LoginBeginResult
        do {
            begun = try await handlers.loginBegin(
                LoginBeginParams(provider: key.provider.rawValue, grant: .authorizationCode, session: key.name == .default ? nil : key.name.rawValue)
            )
        } catch {
            services.logger.warning("sign-in needed: the browser sign-in could not start: \(error.message)", metadata: metadata)
            return
        }
        guard let url = begun.authorizationURL, let opener = desktop.program("xdg-open") else { return }
        // The page's URL is no secret (PKCE keeps the verifier here), but it is not logged either.
        switch await ChildProcess(path: opener, arguments: [url], environment: desktop.environmentLines).runSuspending(input: [], timeout: .seconds(30)) {
        case .exited(0, _, _):
            services.logger.info("sign-in needed: the sign-in page was opened", metadata: metadata)
        case .exited(let status, _, let errorText):
            services.logger.warning("sign-in needed: xdg-open failed (exit status \(status)): \(errorText.prefix(300))", metadata: metadata)
        case .notStarted(let reason):
            services.logger.warning("sign-in needed: xdg-open could not be started: \(reason)", metadata: metadata)
        case .timedOut:
            services.logger.warning("sign-in needed: xdg-open did not finish in time; it was stopped", metadata: metadata)
        case .cancelled:
            break
        }
    }
}
