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
    /// `login.begin` as a caller would send it: the method's handler, called for the owner.
    typealias Begin = @Sendable (LoginBeginParams, PeerCredentials) async throws(AuthGateError) -> LoginBeginResult

    let registry: ProviderRegistry
    let desktop: DesktopSession
    let begin: Begin
    let logger: Logger

    /// The session's owner, as the daemon itself acts for it.
    private func owner(_ key: SessionKey) -> PeerCredentials {
        PeerCredentials(pid: getpid(), uid: key.uid, gid: AccessPolicy.primaryGroupID(uid: key.uid) ?? getegid())
    }

    func canStart(_ key: SessionKey) async -> Bool {
        guard desktop.program("xdg-open") != nil,
            let (configuration, _) = try? await registry.usableProvider(key.provider.rawValue, for: owner(key))
        else { return false }
        return configuration.grants.contains(.authorizationCode)
    }

    func start(_ key: SessionKey) async {
        let metadata = key.logMetadata()
        let begun: LoginBeginResult
        do {
            begun = try await begin(
                LoginBeginParams(provider: key.provider.rawValue, grant: .authorizationCode, session: key.name == .default ? nil : key.name.rawValue),
                owner(key)
            )
        } catch {
            logger.warning("sign-in needed: the browser sign-in could not start: \(error.message)", metadata: metadata)
            return
        }
        guard let url = begun.authorizationURL, let opener = desktop.program("xdg-open") else { return }
        // The page's URL is no secret (PKCE keeps the verifier here), but it is not logged either.
        switch await ChildProcess(path: opener, arguments: [url], environment: desktop.environmentLines).runSuspending(input: [], timeout: .seconds(30)) {
        case .exited(0, _, _):
            logger.info("sign-in needed: the sign-in page was opened", metadata: metadata)
        case .exited(let status, _, let errorText):
            logger.warning("sign-in needed: xdg-open failed (exit status \(status)): \(errorText.prefix(300))", metadata: metadata)
        case .notStarted(let reason):
            logger.warning("sign-in needed: xdg-open could not be started: \(reason)", metadata: metadata)
        case .timedOut:
            logger.warning("sign-in needed: xdg-open did not finish in time; it was stopped", metadata: metadata)
        case .cancelled:
            break
        }
    }
}
