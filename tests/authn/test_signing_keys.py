"""Asymmetric tokens (IAM_JWT_ALGORITHM EdDSA or ES256), the JWKS document and key rotation, over HTTP:
a service verifies a token with PyJWT and the published keys alone; the JWT negative cases stay refused
(alg none, HS/asymmetric confusion, unknown or forged `kid`, `jku`/`jwk`/`x5u` headers)."""

import base64
import datetime as dt
import hashlib
import hmac
import json

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from authn import keys
from authn.models import SigningKey
from tests.conftest import ApiClient, access_claims, client_for, err, ok
from tests.factories import (
    ClientFactory,
    MembershipFactory,
    RoleFactory,
)

AUTH = "Authentication required or invalid credentials."


@pytest.fixture(params=["EdDSA", "ES256"])
def algorithm(request, settings):
    settings.IAM_JWT_ALGORITHM = request.param
    keys.forget()
    yield request.param
    keys.forget()


def describe_self(token, member):
    return ApiClient(token).call("/accounts/describe", {"id": str(member.pk)})


def jwks(api):
    response = api.get("/.well-known/jwks.json")
    assert response.status_code == 200
    return response


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_by_hand(claims: dict, secret: bytes, header: dict | None = None) -> str:
    """PyJWT refuses to use a PEM key as an HMAC secret, so the confusion attack is built by hand."""
    signing_input = ".".join(
        b64(json.dumps(part, separators=(",", ":")).encode())
        for part in ({"alg": "HS256", "typ": "JWT", **(header or {})}, claims)
    )
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


def attacker_key(algorithm):
    return (
        ed25519.Ed25519PrivateKey.generate()
        if algorithm == "EdDSA"
        else ec.generate_private_key(ec.SECP256R1())
    )


def test_hs256_stays_the_default_and_publishes_nothing(api, member):
    token = client_for(member).token
    assert jwt.get_unverified_header(token) == {"alg": "HS256", "typ": "JWT"}
    ok(describe_self(token, member))
    response = jwks(api)
    assert response.json() == {"keys": []}
    assert SigningKey.objects.count() == 0


def test_a_service_verifies_a_token_with_the_jwks_document_alone(api, member, algorithm):
    token = client_for(member).token
    header = jwt.get_unverified_header(token)
    assert header["alg"] == algorithm
    response = jwks(api)
    assert response["Cache-Control"] == "public, max-age=300"
    document = response.json()
    assert [key["kid"] for key in document["keys"]] == [header["kid"]]
    published = document["keys"][0]
    assert published["alg"] == algorithm and published["use"] == "sig"
    assert not {"d", "p", "q", "k"} & set(published)  # public halves only
    # What the README shows another service doing.
    key = jwt.PyJWKSet.from_dict(document)[header["kid"]]
    claims = jwt.decode(token, key.key, algorithms=[algorithm], issuer=settings.IAM_JWT_ISSUER)
    assert claims["sub"] == str(member.pk)
    ok(describe_self(token, member))
    private = keys.serialization.load_pem_private_key(
        keys.crypto.decrypt(SigningKey.objects.get().private_key_encrypted).encode(), password=None
    )
    assert (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
        == SigningKey.objects.get().public_key
    )
    assert "PRIVATE" not in SigningKey.objects.get().private_key_encrypted  # encrypted at rest


def test_hs_and_asymmetric_confusion_is_refused(member, algorithm):
    good = client_for(member).token
    kid = jwt.get_unverified_header(good)["kid"]
    public_pem = SigningKey.objects.get(kid=kid).public_key.encode()
    # An HS256 token keyed with the published public key (the classic confusion attack).
    err(describe_self(hs256_by_hand(access_claims(member), public_pem, {"kid": kid}), member), 401, AUTH)
    # An HS256 token keyed with the HS secret that signs when HS256 is configured.
    hs = jwt.encode(
        access_claims(member), settings.IAM_JWT_SIGNING_KEY, algorithm="HS256", headers={"kid": kid}
    )
    err(describe_self(hs, member), 401, AUTH)
    # alg none, with and without a kid.
    for header in ({"kid": kid}, {}):
        unsigned = jwt.encode(access_claims(member), None, algorithm="none", headers=header)
        err(describe_self(unsigned, member), 401, AUTH)
    # The other asymmetric algorithm, signed with a key of its own.
    other = "ES256" if algorithm == "EdDSA" else "EdDSA"
    forged = jwt.encode(access_claims(member), attacker_key(other), algorithm=other, headers={"kid": kid})
    err(describe_self(forged, member), 401, AUTH)
    ok(describe_self(good, member))


def test_unknown_and_forged_kids_are_refused(member, algorithm):
    good = client_for(member).token
    kid = jwt.get_unverified_header(good)["kid"]
    mine = attacker_key(algorithm)
    public_jwk = keys.public_jwk(mine.public_key(), algorithm)
    cases = [
        {},  # no kid at all
        {"kid": "nope"},
        {"kid": keys.thumbprint(public_jwk)},
        {"kid": kid},  # a published kid over another key's signature
        # Keys named by URL or embedded in the header are never fetched nor trusted.
        {"kid": kid, "jwk": {**public_jwk, "kid": kid}},
        {"kid": keys.thumbprint(public_jwk), "jwk": public_jwk},
        {"kid": kid, "jku": "http://127.0.0.1:9/jwks.json"},
        {"kid": kid, "x5u": "http://127.0.0.1:9/cert.pem"},
    ]
    for header in cases:
        token = jwt.encode(access_claims(member), mine, algorithm=algorithm, headers=header)
        err(describe_self(token, member), 401, AUTH)


def test_warm_verification_costs_no_query_even_for_a_forged_kid(member, algorithm, django_assert_num_queries):
    from authn import tokens

    good = client_for(member).token
    tokens.decode(good, types={tokens.ACCESS})
    forged = jwt.encode(
        access_claims(member), attacker_key(algorithm), algorithm=algorithm, headers={"kid": "x"}
    )
    with django_assert_num_queries(0):
        assert tokens.decode(good, types={tokens.ACCESS})["sub"] == member.pk
        with pytest.raises(tokens.TokenError):
            tokens.decode(forged, types={tokens.ACCESS})


def test_warm_validation_still_makes_no_query(member, workspace, algorithm, django_assert_num_queries):
    MembershipFactory(account=member, workspace=workspace, roles=[RoleFactory(workspace=workspace)])
    client = ClientFactory(workspace=workspace)
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": client_for(member).token}
    assert ok(ApiClient().call("/clients/validate", body))["authorized"] is True
    with django_assert_num_queries(0):
        assert ok(ApiClient().call("/clients/validate", body))["authorized"] is True


def rotate(django_capture_on_commit_callbacks) -> str:
    with django_capture_on_commit_callbacks(execute=True):
        call_command("rotate_signing_key", stdout=open("/dev/null", "w"))  # noqa: SIM115
    return SigningKey.objects.get(retired_at__isnull=True).kid


def test_rotation_signs_with_the_new_key_and_keeps_the_old_one_until_its_tokens_expire(
    api, member, algorithm, django_capture_on_commit_callbacks, monkeypatch
):
    old_token = client_for(member).token
    old_kid = jwt.get_unverified_header(old_token)["kid"]
    new_kid = rotate(django_capture_on_commit_callbacks)
    assert new_kid != old_kid
    new_token = client_for(member).token
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    assert {key["kid"] for key in jwks(api).json()["keys"]} == {old_kid, new_kid}
    ok(describe_self(old_token, member))
    ok(describe_self(new_token, member))

    # A refresh lifetime later, in this process (its keys in memory)...
    later = timezone.now() + settings.IAM_REFRESH_TOKEN_LIFETIME + dt.timedelta(seconds=1)
    monkeypatch.setattr(keys.timezone, "now", lambda: later)
    err(describe_self(old_token, member), 401, AUTH)
    ok(describe_self(new_token, member))
    monkeypatch.undo()
    # ... and in a process that loads the keys afresh.
    SigningKey.objects.filter(kid=old_kid).update(
        retired_at=timezone.now() - settings.IAM_REFRESH_TOKEN_LIFETIME
    )
    keys.forget()
    assert [key["kid"] for key in jwks(api).json()["keys"]] == [new_kid]
    err(describe_self(old_token, member), 401, AUTH)
    ok(describe_self(new_token, member))


def test_a_rotation_in_another_process_is_seen_at_once(member, algorithm, django_capture_on_commit_callbacks):
    client_for(member)  # this process has loaded the first key
    other = keys._keys
    new_kid = rotate(django_capture_on_commit_callbacks)
    keys._keys = other  # as if the rotation had run elsewhere: only the cache's version changed
    assert jwt.get_unverified_header(client_for(member).token)["kid"] == new_kid


def test_a_rotation_is_recorded_with_its_actor_and_key_ids_only(
    member, algorithm, operator, django_capture_on_commit_callbacks
):
    from authn.services import rotate_signing_key
    from iam.models import AuditEntry

    first = rotate(django_capture_on_commit_callbacks)
    by_command = AuditEntry.objects.get(action="signing_key.rotate")
    assert (by_command.actor_kind, by_command.actor_id) == ("command", None)
    assert by_command.changes["kid"]["after"] == first
    second = rotate_signing_key(actor=operator)
    entry = AuditEntry.objects.filter(action="signing_key.rotate").latest("occurred_at")
    assert entry.actor_id == operator.pk
    assert entry.changes == {"kid": {"before": [first], "after": second.kid}, "algorithm": algorithm}


def test_rotate_refuses_under_hs256(db):
    with pytest.raises(CommandError, match="IAM_JWT_ALGORITHM is HS256"):
        call_command("rotate_signing_key")
    assert SigningKey.objects.count() == 0


def test_admin_rotate_action(admin_web, member, algorithm, django_capture_on_commit_callbacks):
    old_kid = jwt.get_unverified_header(client_for(member).token)["kid"]
    page = admin_web.get("/admin/authn/signingkey/")
    assert page.status_code == 200 and old_kid in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(
            "/admin/authn/signingkey/", {"action": "rotate", "_selected_action": [old_kid]}, follow=True
        )
    assert response.status_code == 200
    current = SigningKey.objects.get(retired_at__isnull=True)
    assert current.kid != old_kid and "PRIVATE" not in response.content.decode()
    assert jwt.get_unverified_header(client_for(member).token)["kid"] == current.kid


def test_a_first_key_rolled_back_with_its_transaction_is_dropped(member, algorithm, monkeypatch):
    import time

    from django.db import transaction

    def failed_request():
        with transaction.atomic():
            client_for(member)  # the first key, created in this transaction
            raise RuntimeError("the request failed after issuing")

    with pytest.raises(RuntimeError):
        failed_request()
    assert SigningKey.objects.count() == 0
    # The process may sign with the rolled-back key for at most a minute, then rereads.
    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + keys.SIGNING_KEY_MAX_AGE + 1)
    token = client_for(member).token
    assert jwt.get_unverified_header(token)["kid"] == SigningKey.objects.get().kid
    ok(describe_self(token, member))
