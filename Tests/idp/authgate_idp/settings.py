"""Django settings for the test authorization server.

launch.py passes everything that varies per run through the environment:
  AUTHGATE_IDP_WORKDIR                the work directory (db.sqlite3, oidc-key.pem live there)
  AUTHGATE_IDP_DB                     another database file (to build the cached template)
  AUTHGATE_IDP_PORT                   the HTTPS port, which makes the issuer https://127.0.0.1:PORT/o
  AUTHGATE_IDP_ACCESS_TOKEN_LIFETIME  seconds
  AUTHGATE_IDP_ID_TOKEN_LIFETIME      seconds
  AUTHGATE_IDP_DEVICE_INTERVAL        seconds a device-code client must wait between polls
  AUTHGATE_IDP_AUTHZ_RESPONSE_ISS     "1": authorization responses carry iss (RFC 9207)
"""

import os
from pathlib import Path

WORKDIR = Path(os.environ["AUTHGATE_IDP_WORKDIR"])
PORT = int(os.environ["AUTHGATE_IDP_PORT"])
ORIGIN = f"https://127.0.0.1:{PORT}"

SECRET_KEY = "authgate-test-idp-not-secret"  # a throw-away server on loopback
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "authgate_idp.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,  # DOT's own templates (consent page, device pages)
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("AUTHGATE_IDP_DB", WORKDIR / "db.sqlite3"),
        # gthread serves requests concurrently. A deferred transaction that reads and then
        # writes gets "database is locked" at once when another one writes; IMMEDIATE takes
        # the write lock at BEGIN, where the busy timeout applies. WAL lets readers go on.
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# PBKDF2 costs ~0.4 s per login (and per client-secret check); MD5 is fine for test users.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]

# Served over TLS by gunicorn: the browser flow keeps its session and CSRF cookies secure.
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
CSRF_TRUSTED_ORIGINS = [ORIGIN, f"https://localhost:{PORT}"]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/o/device/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        # DOT logs a long RFC 9700 deprecation notice on every password grant.
        "no_bcp_nag": {
            "()": "django.utils.log.CallbackFilter",
            "callback": lambda record: "discouraged by RFC 9700" not in record.getMessage(),
        },
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "filters": ["no_bcp_nag"]}},
    # Warnings include DOT's reasons for rejecting a request, which helps reading a failed test.
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}

_ACCESS_TOKEN_LIFETIME = int(os.environ.get("AUTHGATE_IDP_ACCESS_TOKEN_LIFETIME", "3600"))
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    # Fixed rather than derived from the request, so it matches whatever Host a client sends.
    "OIDC_ISS_ENDPOINT": f"{ORIGIN}/o",
    "OIDC_RSA_PRIVATE_KEY": (WORKDIR / "oidc-key.pem").read_text(),
    "OIDC_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_VALIDATOR_CLASS": "authgate_idp.validator.Validator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Your name",
        "email": "Your e-mail address",
        "offline_access": "Access while you are away",
        "read": "Read",
        "write": "Write",
    },
    "DEFAULT_SCOPES": ["read", "write"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": _ACCESS_TOKEN_LIFETIME,
    "ID_TOKEN_EXPIRE_SECONDS": int(
        os.environ.get("AUTHGATE_IDP_ID_TOKEN_LIFETIME", _ACCESS_TOKEN_LIFETIME)
    ),
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    "PKCE_REQUIRED": True,
    "OAUTH_DEVICE_VERIFICATION_URI": f"{ORIGIN}/o/device/",
    # DOT's device page fills its form from ?user_code=.
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": f"{ORIGIN}/o/device/?user_code={{user_code}}",
    "DEVICE_FLOW_INTERVAL": int(os.environ.get("AUTHGATE_IDP_DEVICE_INTERVAL", "1")),
    # RFC 9207: adds iss to the successful authorization redirects and advertises
    # authorization_response_iss_parameter_supported in both discovery documents.
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": os.environ.get("AUTHGATE_IDP_AUTHZ_RESPONSE_ISS") == "1",
}
