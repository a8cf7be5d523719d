"""Sign-up, sign-in and tokens (`auth.py`), the second factor (`mfa.py`), sessions,
credentials and the JWKS: one module per resource, listed by path in authn/urls.py."""
