"""Signing keys (RS256 always; EdDSA or ES256 when `IAM_JWT_ALGORITHM` picks one) and the JWKS document
that publishes them.

The service always has an RS256 key (what OpenID relying parties accept by default, for ID tokens): it
is created on first need (the first JWKS read, or the first token it signs), one current key per
algorithm (a unique constraint, so two processes that race to create it end with one), and published
from the first request whatever `IAM_JWT_ALGORITHM` is, so the JWKS document is never empty. Access and
refresh tokens are signed with `IAM_JWT_ALGORITHM`: with the default HS256 their key is the setting
`IAM_JWT_SIGNING_KEY`, never published; with an asymmetric algorithm its keys are `SigningKey` rows too.
Verification is the hot path of every request and of `clients/validate`, so each process keeps the
published public keys in memory, stamped with a version that lives in the shared cache: a warm lookup
costs no query and no cache call. A token whose `kid` is not in memory makes the process compare the
cache's version with its own (one cache call, no query), and reload from the database only when a
rotation changed it, so a forged `kid` cannot make requests hit the database. The key that signs is
checked against the version on each issue (login, refresh), so a rotation done in another process takes
effect at once everywhere, and reread every minute."""

import base64
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from iam.platform import cache, crypto

ASYMMETRIC = frozenset({"EdDSA", "ES256"})  # what IAM_JWT_ALGORITHM may pick besides HS256
ALWAYS = "RS256"  # the key the service always has (OpenID Connect Core 15.1: RS256 is the default)
RSA_KEY_BITS = 2048  # RFC 7518 3.3: 2048 bits or larger
VERSION_KEY = "jwt-signing-keys:version"
SIGNING_KEY_MAX_AGE = 60  # seconds


def asymmetric() -> bool:
    return settings.IAM_JWT_ALGORITHM in ASYMMETRIC


def published_algorithms() -> tuple[str, ...]:
    """The algorithms whose keys the service holds and publishes: RS256, and IAM_JWT_ALGORITHM's when it
    is asymmetric."""
    return (ALWAYS, settings.IAM_JWT_ALGORITHM) if asymmetric() else (ALWAYS,)


@dataclass(frozen=True)
class PublicKey:
    kid: str
    algorithm: str
    key: object  # a `cryptography` public key
    published_until: datetime | None  # None: the current key


@dataclass
class _KeySet:
    version: object = None
    public: dict | None = None  # kid -> PublicKey
    signing: dict | None = None  # algorithm -> (kid, private key) of its current key
    loaded_at: float = 0.0


_keys = _KeySet()
_lock = threading.Lock()


def _generate(algorithm: str):
    if algorithm == ALWAYS:
        return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    if algorithm == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    return ec.generate_private_key(ec.SECP256R1())


def public_jwk(public_key, algorithm: str) -> dict:
    tool = {ALWAYS: RSAAlgorithm, "EdDSA": OKPAlgorithm}.get(algorithm, ECAlgorithm)
    return tool.to_jwk(public_key, as_dict=True)


# RFC 7638 3.2: the members each key type's thumbprint covers
THUMBPRINT_MEMBERS = {"RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x"), "EC": ("crv", "kty", "x", "y")}


def thumbprint(jwk: dict) -> str:
    """RFC 7638: SHA-256 over the required members in lexicographic order, without whitespace."""
    required = THUMBPRINT_MEMBERS[jwk["kty"]]
    canonical = json.dumps({name: jwk[name] for name in required}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def new_key(algorithm: str):
    """A new signing key row (the caller runs in a transaction and calls `changed()`)."""
    from .models import SigningKey

    private = _generate(algorithm)
    public = private.public_key()
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return SigningKey.objects.create(
        kid=thumbprint(public_jwk(public, algorithm)),
        algorithm=algorithm,
        public_key=pem.decode(),
        private_key_encrypted=crypto.encrypt(private_pem.decode()),
    )


def changed() -> None:
    """Call in the transaction that adds or retires a key: dropping the version, now and again after the
    commit, makes every process reload (a drop that cannot reach the cache is retried through the
    outbox)."""
    cache.around_commit(lambda: cache.delete_many([VERSION_KEY]))


def _version() -> object:
    version = cache.get(VERSION_KEY)
    if version is cache.MISSING or version is None:
        # Dropped by a rotation, or lost: the first process to ask starts a new version, and every
        # process, seeing a value it has not loaded, reloads once.
        cache.add(VERSION_KEY, cache.new_generation(), None)
        version = cache.get(VERSION_KEY)
        if version is cache.MISSING or version is None:
            version = cache.new_generation()  # cache down: the database answers every time
    return version


def _published_since():
    return timezone.now() - settings.IAM_REFRESH_TOKEN_LIFETIME


def _load(version: object) -> _KeySet:
    from .models import SigningKey

    rows = list(
        SigningKey.objects.filter(algorithm__in=published_algorithms())
        .exclude(retired_at__lt=_published_since())
        .order_by("-created_at")
    )
    public, signing = {}, {}
    for row in rows:
        until = row.retired_at + settings.IAM_REFRESH_TOKEN_LIFETIME if row.retired_at else None
        key = serialization.load_pem_public_key(row.public_key.encode())
        public[row.kid] = PublicKey(row.kid, row.algorithm, key, until)
        if row.retired_at is None and row.algorithm not in signing:
            private = crypto.decrypt(row.private_key_encrypted).encode()
            signing[row.algorithm] = (row.kid, serialization.load_pem_private_key(private, password=None))
    return _KeySet(version=version, public=public, signing=signing, loaded_at=time.monotonic())


def _refresh(version: object, *, max_age: float | None = None) -> _KeySet:
    global _keys
    with _lock:
        stale = max_age is not None and time.monotonic() - _keys.loaded_at > max_age
        if stale or _keys.version != version or _keys.public is None:
            _keys = _load(version)
        return _keys


def _ensure_signing_keys(keys: _KeySet, algorithms: tuple[str, ...]) -> _KeySet:
    """Creates the current key of each of `algorithms` that has none: the first JWKS read or token of a
    fresh installation, or the first after IAM_JWT_ALGORITHM changed. Race-safe across processes: one
    current key per algorithm is a unique constraint, so a process that loses the race keeps the winner's."""
    from .models import SigningKey

    missing = [algorithm for algorithm in algorithms if algorithm not in keys.signing]
    if not missing:
        return keys
    for algorithm in missing:
        try:
            with transaction.atomic():
                if not SigningKey.objects.filter(algorithm=algorithm, retired_at__isnull=True).exists():
                    new_key(algorithm)
                    changed()
        except IntegrityError:
            pass  # another process created it meanwhile (constraint `signing_key_one_current`)
    return _refresh(_version(), max_age=0)  # reread now, whether this process or another made the key


def signing_key(algorithm: str | None = None) -> tuple[object, dict | None]:
    """The key that signs a new token of `algorithm` (by default IAM_JWT_ALGORITHM; RS256 for what must
    be RS256, the OpenID ID tokens), and the header that names it."""
    algorithm = algorithm or settings.IAM_JWT_ALGORITHM
    if algorithm not in published_algorithms():
        return settings.IAM_JWT_SIGNING_KEY, None
    # The signing key is also reread every minute: a first key created in a transaction that then
    # rolled back cannot sign for longer than that.
    keys = _ensure_signing_keys(_refresh(_version(), max_age=SIGNING_KEY_MAX_AGE), (algorithm,))
    kid, private = keys.signing[algorithm]
    return private, {"kid": kid}


def _published(kid: str) -> PublicKey | None:
    found = (_keys.public or {}).get(kid)
    if found is None:
        version = _version()
        if version != _keys.version:
            found = _refresh(version).public.get(kid)
    if found is not None and found.published_until is not None and found.published_until <= timezone.now():
        return None  # dropped out since the process loaded it
    return found


def verification_key(token: str) -> object:
    """The key that must have signed `token`: the HS256 secret, or the published public key its `kid`
    names. Only `kid` is read from the header; `jku`, `jwk` and `x5u` are ignored, never fetched."""
    if not asymmetric():
        return settings.IAM_JWT_SIGNING_KEY
    kid = jwt.get_unverified_header(token).get("kid")
    found = _published(kid) if isinstance(kid, str) and len(kid) <= 64 else None
    if found is None or found.algorithm != settings.IAM_JWT_ALGORITHM:  # an RS256 key signs no session
        raise jwt.InvalidKeyError("unknown kid")
    return found.key


def published_keys() -> list[dict]:
    """The JWKS document's `keys`: public keys only, never an HS secret; never empty, since the RS256
    key is made here if no request has needed it yet."""
    keys = _ensure_signing_keys(_refresh(_version()), published_algorithms())
    now = timezone.now()
    return [
        {**public_jwk(found.key, found.algorithm), "kid": found.kid, "alg": found.algorithm, "use": "sig"}
        for found in keys.public.values()
        if found.published_until is None or found.published_until > now
    ]


def forget() -> None:
    """Drops this process's copy (tests that change `IAM_JWT_ALGORITHM`)."""
    global _keys
    with _lock:
        _keys = _KeySet()
