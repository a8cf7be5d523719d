"""Secrets at rest, keyed with `IAM_ENCRYPTION_KEY`: Fernet encryption for what the service must read back
(client secrets that sign pushes, CONTRACT 7; PKCE verifiers), and a keyed digest for what it only compares
(client secrets at validation, in constant time without decrypting)."""

import functools
import hashlib
import hmac
import secrets

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@functools.cache
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def new_secret() -> str:
    return secrets.token_urlsafe(32)  # 256 bits


def encrypt(secret: str) -> str:
    return _fernet(settings.IAM_ENCRYPTION_KEY).encrypt(secret.encode()).decode()


def decrypt(token: str) -> str:
    return _fernet(settings.IAM_ENCRYPTION_KEY).decrypt(token.encode()).decode()


def digest(secret: str) -> str:
    return hmac.new(settings.IAM_ENCRYPTION_KEY.encode(), secret.encode(), hashlib.sha256).hexdigest()


def matches(secret: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(secret), stored_digest)


__all__ = ["InvalidToken", "decrypt", "digest", "encrypt", "matches", "new_secret"]
