"""What a login with TOTP costs (`make bench`'s `totp` figure, bench/logins.py): the password step verifies
the password once with argon2id, and the code step verifies none, so the two steps cost one argon2id
verification."""

from django.contrib.auth.hashers import Argon2PasswordHasher, get_hasher

from tests.conftest import ok

from . import test_totp as totp
from .test_totp import code, enrolled, login

ada, clock = totp.ada, totp.clock  # the fixtures, as there


def test_a_login_with_totp_verifies_one_password(api, ada, clock, monkeypatch):
    _, secret, codes = enrolled(api, ada, clock)
    hasher = type(get_hasher())
    assert issubclass(hasher, Argon2PasswordHasher)
    calls = []
    verify = hasher.verify

    def counted(self, password, encoded):
        calls.append(encoded)
        return verify(self, password, encoded)

    monkeypatch.setattr(hasher, "verify", counted)
    challenge = ok(login(api, ada))["mfa_token"]
    assert len(calls) == 1
    session = ok(api.call("/auth/mfa/verify", {"mfa_token": challenge, "code": code(secret, clock.now)}))
    assert "access_token" in session and len(calls) == 1
    # the same with a recovery code
    challenge = ok(login(api, ada))["mfa_token"]
    ok(api.call("/auth/mfa/verify", {"mfa_token": challenge, "recovery_code": codes[0]}))
    assert len(calls) == 2
