"""The exceptions: one class per stable reason code of authgated's errors."""

from __future__ import annotations

from typing import Optional


class AuthGateError(Exception):
    """A call authgated refused: `reason` is its stable reason code."""

    reason = "internal_error"

    def __init__(self, message: str, reason: Optional[str] = None, retry_after_seconds: Optional[int] = None):
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.retry_after_seconds = retry_after_seconds

    def __str__(self) -> str:
        return f"{self.message} [{self.reason}]"


class DaemonUnreachable(AuthGateError):
    """Nothing answers on the socket (no daemon, or no permission)."""
    reason = "daemon_unreachable"


class ProtocolError(AuthGateError):
    """authgated answered something that is not a response to the call."""
    reason = "protocol_error"


def _error(name: str, code: str, doc: str) -> type:
    return type(name, (AuthGateError,), {"reason": code, "__doc__": doc, "__module__": "authgate_client"})


LoginRequired = _error("LoginRequired", "login_required", "There is no usable session: sign in (authgate login PROVIDER).")
InvalidCredentials = _error("InvalidCredentials", "invalid_credentials", "The username or password is incorrect.")
UnknownProvider = _error("UnknownProvider", "unknown_provider", "No such provider, or not one the caller may use.")
ProviderUnavailable = _error("ProviderUnavailable", "provider_unavailable", "The provider's configuration cannot be used.")
UnsupportedGrant = _error("UnsupportedGrant", "unsupported_grant", "The provider does not allow that.")
PermissionDenied = _error("PermissionDenied", "permission_denied", "Not allowed.")
RateLimited = _error("RateLimited", "rate_limited", "Too many at once; retry after retry_after_seconds.")
NetworkError = _error("NetworkError", "network_error", "The provider cannot be reached.")
ServiceUnavailable = _error("ServiceUnavailable", "service_unavailable", "The provider is failing or overloaded.")
ServerError = _error("ServerError", "server_error", "The provider answered something wrong.")
ValidationFailed = _error("ValidationFailed", "validation_failed", "The input was refused.")
InvalidParams = _error("InvalidParams", "invalid_params", "The call's parameters were refused.")
InternalError = _error("InternalError", "internal_error", "authgated failed.")
DPoPRejected = _error("DPoPRejected", "dpop_rejected", "The provider refused the DPoP proof of the session's key.")
RegistrationRefused = _error("RegistrationRefused", "registration_refused",
                             "The provider refused the dynamic client registration or the client's deletion.")
WorkloadTokenInvalid = _error("WorkloadTokenInvalid", "workload_token_invalid",
                              "The platform token a service signs in with is missing, expired or not a JWT.")
ConsentDenied = _error("ConsentDenied", "consent_denied",
                       "The user did not allow this program to have the session's token (or could not be asked).")

#: Exception class by reason code; reasons not listed raise AuthGateError with that reason.
ERRORS = {cls.reason: cls for cls in (LoginRequired, InvalidCredentials, UnknownProvider, ProviderUnavailable,
                                      UnsupportedGrant, PermissionDenied, RateLimited, NetworkError, ServiceUnavailable,
                                      ServerError, ValidationFailed, InvalidParams, InternalError, DPoPRejected,
                                      RegistrationRefused, WorkloadTokenInvalid, ConsentDenied)}
