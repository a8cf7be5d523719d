"""The SSO endpoints, listed by path in sso/urls.py: a workspace's OpenID Connect connections (create,
describe, list, update, delete, verify-domain), and the login through one (`auth/sso/initiate`, public,
and the browser's callback)."""
