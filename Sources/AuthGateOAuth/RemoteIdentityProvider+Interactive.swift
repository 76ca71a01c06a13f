public import AuthGateCore
import AuthGateHTTP
public import FoundationEssentials
import Logging

// Interactive sign-ins: the device authorization grant (RFC 8628) and the authorization-code
// grant with PKCE (RFC 6749 §4.1, RFC 7636) on a loopback redirect (RFC 8252).
extension RemoteIdentityProvider {
    /// The scopes of an interactive sign-in: the caller's, else the file's.
    private func interactiveScopes(_ scopes: [String]) -> [String] {
        scopes.isEmpty ? configuration.scopes : scopes
    }

    // MARK: Device authorization grant

    /// Asks the device authorization endpoint for a user code (RFC 8628 §3.1).
    /// - Throws: `unsupported_grant` when the provider has no device authorization endpoint.
    public func beginDeviceAuthorization(scopes: [String]) async throws(AuthGateError) -> DeviceAuthorization {
        let metadata = try await resolvedMetadata()
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw AuthGateError(.unsupportedGrant, "\(name) has no device authorization endpoint; its file can name one in endpoints.device_authorization.")
        }
        let fields = DeviceAuthorizationGrant.authorizationFields(scopes: interactiveScopes(scopes), audience: settings.audience)
        let response = try await tokenEndpoint.post(endpoint, to: .deviceAuthorization, fields)
        guard response.status == 200 else {
            throw tokenEndpoint.refusal(response, purpose: .interactiveSignIn, what: "device authorization request")
        }
        guard let object = (try? JSONValue.parse(Data(response.body)))?.objectValue else {
            throw ProviderFailure.malformed(name, what: "device authorization response", "it is not a JSON object")
        }
        var authorization = try DeviceAuthorizationGrant.parse(object, provider: name, now: now())
        authorization.proofKey = newProofKey()
        logger.debug("device authorization started", metadata: ["provider.id": "\(name)", "device.interval": "\(authorization.interval)"])
        return authorization
    }

    /// Polls until the user has finished on the verification page (RFC 8628 §3.4, §3.5): every
    /// `interval` seconds, 5 more after each `slow_down`, and backing off (doubling, to 60 s)
    /// while the provider cannot be reached or fails.
    /// - Returns: The sign-in or why it failed; `nil` when the calling task is cancelled.
    public func awaitDeviceAuthorization(_ authorization: DeviceAuthorization, scopes: [String]) async -> Result<SignInResult, AuthGateError>? {
        var interval = authorization.interval
        while true {
            do {
                try await Task.sleep(for: .seconds(interval))
            } catch {
                return nil
            }
            do throws(AuthGateError) {
                switch try await pollDeviceAuthorization(authorization, scopes: scopes) {
                case .pending: continue
                case .slowDown: interval += 5  // §3.5
                case .signedIn(let signIn): return .success(signIn)
                }
            } catch  where error.reason == .networkError || error.reason == .serviceUnavailable {
                // §3.5: on a connection problem, back off and keep polling.
                interval = max(interval, min(interval * 2, 60))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Polls the token endpoint once with the device code (RFC 8628 §3.4, §3.5).
    /// - Throws: `permission_denied` on `access_denied`, `flow_expired` on `expired_token`,
    ///   and the usual reasons for anything else.
    func pollDeviceAuthorization(_ authorization: DeviceAuthorization, scopes: [String]) async throws(AuthGateError) -> DevicePoll {
        let metadata = try await resolvedMetadata()
        let response = try await tokenEndpoint.post(
            metadata.tokenEndpoint,
            DeviceAuthorizationGrant.tokenFields(authorization.deviceCode),
            proofKey: authorization.proofKey
        )
        if response.status == 200, tokenEndpoint.oauthError(response) == nil {
            var tokens = try tokenEndpoint.parse(response, requestedScopes: interactiveScopes(scopes), now: now())
            tokens.proofKey = authorization.proofKey
            return .signedIn(try await signedIn(tokens))
        }
        switch tokenEndpoint.oauthError(response)?.error {
        case "authorization_pending": return .pending
        case "slow_down": return .slowDown
        case "access_denied":
            throw AuthGateError(.permissionDenied, "The sign-in to \(name) was denied on the verification page (access_denied).")
        case "expired_token":
            throw AuthGateError(.flowExpired, "The code for \(name) expired before it was approved (expired_token); start the sign-in again.")
        default:
            throw tokenEndpoint.refusal(response, purpose: .interactiveSignIn)
        }
    }

    // MARK: Authorization code with PKCE

    /// A fresh authorization request for a browser sign-in.
    /// - Parameters:
    ///   - redirectURI: The loopback listener's URL, its port included.
    ///   - prompt: OpenID Connect `prompt` (`create` for registration).
    /// The request is pushed (RFC 9126) when the file's `par` and the metadata say so.
    /// - Throws: `unsupported_grant` when the provider has no authorization endpoint, or PAR
    ///   is required by one side and impossible on the other; the PAR endpoint's failure.
    public func authorizationRequest(redirectURI: URL, scopes: [String], prompt: String?) async throws(AuthGateError) -> AuthorizationRequest {
        let metadata = try await resolvedMetadata()
        guard let endpoint = metadata.authorizationEndpoint else {
            throw AuthGateError(.unsupportedGrant, "\(name) has no authorization endpoint; its file can name one in endpoints.authorization.")
        }
        var (request, parameters) = AuthorizationCodeGrant.request(
            endpoint: endpoint,
            clientID: settings.clientID,
            redirectURI: redirectURI,
            scopes: interactiveScopes(scopes),
            prompt: prompt,
            audience: settings.audience,
            extra: settings.quirks.authorizationParameters,
            issuer: metadata.issuer ?? settings.issuer?.absoluteString,
            requiresIssuer: metadata.authorizationResponseIssParameterSupported,
            proofKey: newProofKey()
        )
        switch (settings.pushedAuthorization, metadata.pushedAuthorizationRequestEndpoint) {
        case (.off, _) where metadata.requirePushedAuthorizationRequests:
            throw AuthGateError(
                .unsupportedGrant,
                "\(name) requires pushed authorization requests (require_pushed_authorization_requests), but its file sets par to \"off\"."
            )
        case (.required, nil):
            throw AuthGateError(.unsupportedGrant, "\(name)'s file sets par to \"required\", but the provider names no pushed_authorization_request_endpoint.")
        case (.off, _), (.auto, nil):
            return request
        case (.auto, let parEndpoint?), (.required, let parEndpoint?):
            let requestURI = try await push(parameters, to: parEndpoint)
            // §4: only these two; everything else is bound to the request_uri.
            request.url = AuthorizationCodeGrant.url(endpoint, [("client_id", settings.clientID), ("request_uri", requestURI)])
            logger.debug("authorization request pushed", metadata: ["provider.id": "\(name)"])
            return request
        }
    }

    /// Sends the authorization request's parameters to the PAR endpoint, with this client's
    /// authentication (RFC 9126 §2.1).
    private func push(_ parameters: [(String, String)], to endpoint: URL) async throws(AuthGateError) -> String {
        let response = try await tokenEndpoint.post(endpoint, to: .pushedAuthorization, parameters)
        guard response.status == 201 || response.status == 200 else {
            throw tokenEndpoint.refusal(response, purpose: .interactiveSignIn, what: "pushed authorization request")
        }
        return try PushedAuthorization.parse(response, provider: name)
    }

    /// Checks the query of a request to the redirect URI against `request` and, when it is
    /// this sign-in's answer and carries a code, redeems the code and verifies the ID token.
    ///
    /// Order matters: `state` first (is this ours?), then `iss` (RFC 9207 §2.4: from the
    /// provider we asked, not another one in a mix-up), then `error`, then the code.
    public func completeAuthorization(_ parameters: [String: String], request: AuthorizationRequest) async -> AuthorizationResponseOutcome {
        guard let state = parameters["state"], request.state.constantTimeEquals(state) else {
            return .ignored("This request does not carry the state of the pending sign-in to \(name); it was refused.")
        }
        do throws(AuthGateError) {
            return .finished(.success(try await redeem(parameters, request: request)))
        } catch {
            return .finished(.failure(error))
        }
    }

    private func redeem(_ parameters: [String: String], request: AuthorizationRequest) async throws(AuthGateError) -> SignInResult {
        if let iss = parameters["iss"] {
            guard iss == request.issuer else {
                throw AuthGateError(
                    .serverError,
                    "The authorization response names the issuer \"\(iss.prefix(128))\", not \(name)'s; it was refused (RFC 9207 mix-up defence)."
                )
            }
        } else if request.requiresIssuer, parameters["error"] == nil {
            // Error responses without iss are taken: they end the sign-in and hand nothing out.
            throw AuthGateError(.serverError, "\(name) announces iss in its authorization responses, but this one has none; it was refused (RFC 9207).")
        }
        if let error = parameters["error"] {
            throw Self.authorizationError(error, description: ProviderFailure.sanitize(parameters["error_description"]), provider: name)
        }
        guard let code = parameters["code"], !code.isEmpty else {
            throw AuthGateError(.serverError, "\(name) sent the browser back without an authorization code.")
        }
        let metadata = try await resolvedMetadata()
        let tokens = try await tokenEndpoint.requestTokens(
            at: metadata.tokenEndpoint,
            AuthorizationCodeGrant.tokenFields(code: Secret(code), request: request),
            purpose: .interactiveSignIn,
            requestedScopes: request.scopes,
            proofKey: request.proofKey,
            now: now()
        )
        guard let idToken = tokens.idToken else {
            if isOIDC, request.scopes.contains("openid") {
                throw AuthGateError(.serverError, "\(name) issued no ID token although openid was asked for.")
            }
            return SignInResult(tokens: tokens, subject: nil)
        }
        let claims = try await verify(idToken, nonce: request.nonce?.exposedValue)
        return SignInResult(tokens: tokens, subject: claims.sub, displayName: claims.displayName)
    }

    /// An error redirect (RFC 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6) as a reason.
    static func authorizationError(_ error: String, description: String?, provider: String) -> AuthGateError {
        let detail = description.map { " (the provider says: \($0))" } ?? ""
        let code = String(error.prefix(64).filter { $0.isASCII && ($0.isLetter || $0 == "_") })
        switch error {
        case "access_denied":
            return AuthGateError(.permissionDenied, "The sign-in to \(provider) was refused on its page (access_denied)\(detail).")
        case "unauthorized_client", "unsupported_response_type":
            return AuthGateError(.unsupportedGrant, "\(provider) does not let this client sign in with a browser (\(code))\(detail).")
        case "login_required", "interaction_required", "consent_required", "account_selection_required":
            return AuthGateError(.loginRequired, "\(provider) needs you to sign in on its page (\(code))\(detail).")
        case "temporarily_unavailable", "server_error":
            return AuthGateError(.serviceUnavailable, "\(provider) could not complete the sign-in (\(code))\(detail).")
        case "invalid_scope":
            return AuthGateError(
                .validationFailed,
                "\(provider) refused the requested scopes\(detail).",
                fields: [FieldError(field: "scopes", message: "refused by the provider")]
            )
        default:
            return AuthGateError(.serverError, "\(provider) refused the sign-in with \"\(code)\"\(detail).")
        }
    }
}
