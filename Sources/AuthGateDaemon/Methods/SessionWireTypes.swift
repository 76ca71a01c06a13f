import AuthGateCore
import AuthGateRPC

// The session manager and the flows speak in domain values (SessionReports); the handlers turn
// them into what the RPC answers, here.

extension RefreshStatistics {
    init(_ report: RefreshReport) {
        self.init(
            inFlight: report.inFlight,
            waiting: report.waiting,
            started: report.started,
            latenessP50Seconds: report.latenessP50Seconds,
            latenessP99Seconds: report.latenessP99Seconds,
            latenessMaxSeconds: report.latenessMaxSeconds
        )
    }
}

extension LoginBeginResult {
    init(_ pending: PendingSignIn) {
        self.init(
            flowID: pending.flowID,
            grant: pending.grant,
            verificationURI: pending.verificationURI,
            verificationURIComplete: pending.verificationURIComplete,
            userCode: pending.userCode,
            authorizationURL: pending.authorizationURL,
            expiresAt: pending.expiresAt
        )
    }
}

extension LoginResult {
    init(_ signedIn: SignedInSession) {
        self.init(
            provider: signedIn.key.provider.rawValue,
            session: signedIn.key.name.rawValue,
            state: signedIn.state,
            expiresAt: signedIn.expiresAt,
            subject: signedIn.subject,
            displayName: signedIn.displayName,
            notice: signedIn.notSaved.map {
                "The session could not be saved to disk (\($0)): it lasts until the daemon stops, and `authgate status` says so until a save succeeds."
            }
        )
    }
}

extension SessionStatus {
    /// - Parameter showingUID: An administrator's list of everyone's sessions names each one's uid.
    init(_ summary: SessionSummary, showingUID: Bool) {
        self.init(
            provider: summary.provider,
            session: summary.session,
            state: summary.state,
            expiresAt: summary.expiresAt,
            nextRefreshAt: summary.nextRefreshAt,
            lastError: summary.lastError,
            subject: summary.subject,
            displayName: summary.displayName,
            uid: showingUID ? summary.key.uid : nil,
            refreshOverdueSeconds: summary.refreshOverdueSeconds,
            dpopJKT: summary.dpopThumbprint,
            notSaved: summary.notSaved
        )
    }
}
