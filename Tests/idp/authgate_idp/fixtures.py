"""The fixed users and OAuth clients of the test authorization server, and the code that
builds a migrated database holding them.

Run as `python -m authgate_idp.fixtures OUTPUT.sqlite3` (with the settings' environment) to
write a fresh database; launch.py does that once and caches the result.
"""

import os
import sys

USERS = {
    # username: (password, email, first name, last name)
    "alice": ("alice-password-1", "alice@example.com", "Alice", "Example"),
    "bob": ("bob-password-1", "bob@example.com", "Bob", "Example"),
}

# DOT gives an application a single grant type (refresh_token comes with every grant that
# issues refresh tokens), so there is one client per flow.
#   client_id: (client type, grant type, secret or None, redirect URIs, OIDC algorithm, skip consent)
CLIENTS = {
    "authgate-password": ("public", "password", None, "", "RS256", False),
    "authgate-device": ("public", "urn:ietf:params:oauth:grant-type:device_code", None, "", "RS256", False),
    # A registered http://127.0.0.1 URI matches any port (RFC 8252 §7.3), the path must match.
    "authgate-browser": ("public", "authorization-code", None, "http://127.0.0.1/callback", "RS256", True),
    # The same, but showing the consent page (DOT asks every time), where the user can deny.
    "authgate-browser-consent": (
        "public", "authorization-code", None, "http://127.0.0.1/callback", "RS256", False,
    ),
    "authgate-service": ("confidential", "client-credentials", "authgate-service-secret-1", "", "", False),
    "authgate-confidential-password": (
        "confidential", "password", "authgate-confidential-password-secret-1", "", "RS256", False,
    ),
}


def create_database() -> None:
    """Migrates the configured database and adds USERS and CLIENTS."""
    import django
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    from django.contrib.auth.models import User
    from oauth2_provider.models import get_application_model

    call_command("migrate", verbosity=0, interactive=False)
    for username, (password, email, first, last) in USERS.items():
        User.objects.create_user(username, email, password, first_name=first, last_name=last)
    Application = get_application_model()
    for client_id, (client_type, grant, secret, redirect_uris, algorithm, skip) in CLIENTS.items():
        # client_secret is the plain text here; DOT hashes it on save (hash_client_secret).
        Application.objects.create(
            client_id=client_id, name=client_id, client_type=client_type,
            authorization_grant_type=grant, client_secret=secret or "",
            redirect_uris=redirect_uris, algorithm=algorithm, skip_authorization=skip,
        )
    # Leave one self-contained file: in WAL mode (see settings) part of the data could still
    # sit in a -wal file beside it, which copying the database alone would lose.
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=DELETE")
    connection.close()


if __name__ == "__main__":
    os.environ["AUTHGATE_IDP_DB"] = sys.argv[1]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "authgate_idp.settings")
    create_database()
