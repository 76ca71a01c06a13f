from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    """Adds the standard profile and email claims (DOT sends only `sub`, the user's primary
    key). DOT keeps only those the granted scopes allow (oidc_claim_scope): profile → names,
    email → email. Taking no request argument makes DOT list them in the discovery document's
    claims_supported."""

    def get_additional_claims(self):
        return {
            "preferred_username": lambda r: r.user.username,
            "given_name": lambda r: r.user.first_name,
            "family_name": lambda r: r.user.last_name,
            "name": lambda r: r.user.get_full_name() or r.user.username,
            "email": lambda r: r.user.email,
            "email_verified": lambda r: bool(r.user.email),
        }
