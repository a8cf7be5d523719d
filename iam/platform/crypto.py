"""Secrets at rest, keyed with `IAM_ENCRYPTION_KEY`: Fernet encryption for what the service must read back
(client secrets that sign pushes, docs/integration.md#validate-each-token-clientsvalidate; PKCE verifiers),
and a keyed digest for what it only compares (client secrets at validation, in constant time without
decrypting)."""

import base64
import functools
import hashlib
import hmac
import secrets

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@functools.cache
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


WEBHOOK_SECRET_PREFIX = "whsec_"


def new_client_secret() -> str:
    """A client secret in the Standard Webhooks form: `whsec_` and the base64 of 32 random bytes (256 bits),
    so a receiver passes it unchanged to any Standard Webhooks library."""
    return WEBHOOK_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def webhook_signing_key(secret: str) -> bytes:
    """The HMAC key of a client secret: the decoded bytes of a `whsec_` secret; a secret issued before
    that form (unprefixed) keeps signing with its UTF-8 bytes until it is regenerated."""
    if secret.startswith(WEBHOOK_SECRET_PREFIX):
        return base64.b64decode(secret.removeprefix(WEBHOOK_SECRET_PREFIX))
    return secret.encode()


def encrypt(secret: str) -> str:
    return _fernet(settings.IAM_ENCRYPTION_KEY).encrypt(secret.encode()).decode()


def decrypt(token: str) -> str:
    return _fernet(settings.IAM_ENCRYPTION_KEY).decrypt(token.encode()).decode()


def digest(secret: str) -> str:
    return hmac.new(settings.IAM_ENCRYPTION_KEY.encode(), secret.encode(), hashlib.sha256).hexdigest()


def digest_matches(secret: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(secret), stored_digest)


__all__ = [
    "InvalidToken",
    "decrypt",
    "digest",
    "digest_matches",
    "encrypt",
    "new_client_secret",
    "webhook_signing_key",
]
