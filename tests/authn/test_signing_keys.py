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
from django.core.management import call_command
from django.db.models import QuerySet
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


def rs256_keys(document: dict) -> list[dict]:
    return [key for key in document["keys"] if key["alg"] == "RS256"]


def test_under_hs256_the_jwks_publishes_the_rs256_key_and_never_the_secret(api, member):
    """docs/security.md#tokens: the JWKS is never empty, whatever IAM_JWT_ALGORITHM is; under the
    default HS256 it holds the RS256 key the service always has (made at the first read), never the HS
    secret."""
    token = client_for(member).token
    assert jwt.get_unverified_header(token) == {"alg": "HS256", "typ": "JWT"}
    ok(describe_self(token, member))
    assert SigningKey.objects.count() == 0  # an HS256 session needs no key row
    document = jwks(api).json()
    [published] = document["keys"]
    current = SigningKey.objects.get(retired_at__isnull=True)
    assert (current.algorithm, published["kid"]) == ("RS256", current.kid)
    assert (published["kty"], published["alg"], published["use"]) == ("RSA", "RS256", "sig")
    assert not {"d", "p", "q", "dp", "dq", "qi", "k"} & set(published)  # the public half only
    assert settings.IAM_JWT_SIGNING_KEY not in json.dumps(document)
    # What signs with it verifies with the published key alone (the ID tokens to come).
    private, header = keys.signing_key("RS256")
    signed = jwt.encode({"sub": str(member.pk)}, private, algorithm="RS256", headers=header)
    key = jwt.PyJWKSet.from_dict(document)[header["kid"]]
    assert jwt.decode(signed, key.key, algorithms=["RS256"])["sub"] == str(member.pk)
    # The same key in another process, and no second one.
    keys.forget()
    assert jwks(api).json() == document
    assert SigningKey.objects.count() == 1
    # An RS256 token is no session, even with the service's own key.
    err(
        describe_self(jwt.encode(access_claims(member), private, algorithm="RS256", headers=header), member),
        401,
        AUTH,
    )


def test_switching_to_an_asymmetric_algorithm_publishes_its_key_before_any_token(api, member, algorithm):
    """The JWKS read first, before any token was signed, already holds the new algorithm's key: a
    service fetching it then verifies the first token without fetching again."""
    document = jwks(api).json()
    assert sorted(key["alg"] for key in document["keys"]) == sorted(["RS256", algorithm])
    token = client_for(member).token
    published = {key["kid"]: key for key in document["keys"]}
    assert published[jwt.get_unverified_header(token)["kid"]]["alg"] == algorithm
    assert SigningKey.objects.filter(retired_at__isnull=True).count() == 2


def test_an_rs256_token_is_refused_where_the_algorithm_is_another(member, algorithm):
    private, header = keys.signing_key("RS256")
    forged = jwt.encode(access_claims(member), private, algorithm="RS256", headers=header)
    err(describe_self(forged, member), 401, AUTH)


def test_two_processes_making_the_first_key_at_once_end_with_one(api, monkeypatch):
    """The race, as the loser sees it: this process has loaded no key; another inserts the first RS256
    key after this one found none (its check answered before the other's commit) and before the cache's
    version moved; this one's insert is refused by the constraint, and the winner's key is published.
    tests/live/test_signing_keys_live.py runs the race for real."""
    keys._refresh(keys._version())  # this process: no key yet
    winner = keys.new_key("RS256")  # the other process's, committed meanwhile
    exists = QuerySet.exists
    monkeypatch.setattr(QuerySet, "exists", lambda qs: False if qs.model is SigningKey else exists(qs))
    [published] = jwks(api).json()["keys"]
    assert published["kid"] == winner.kid
    assert list(SigningKey.objects.values_list("kid", flat=True)) == [winner.kid]


def test_a_service_verifies_a_token_with_the_jwks_document_alone(api, member, algorithm):
    token = client_for(member).token
    header = jwt.get_unverified_header(token)
    assert header["alg"] == algorithm
    response = jwks(api)
    assert response["Cache-Control"] == "public, max-age=300"
    document = response.json()
    assert sorted(key["alg"] for key in document["keys"]) == sorted([algorithm, "RS256"])
    [published] = [key for key in document["keys"] if key["kid"] == header["kid"]]
    assert published["alg"] == algorithm and published["use"] == "sig"
    assert not {"d", "p", "q", "k"} & set(published)  # public halves only
    # What the README shows another service doing.
    key = jwt.PyJWKSet.from_dict(document)[header["kid"]]
    claims = jwt.decode(token, key.key, algorithms=[algorithm], issuer=settings.IAM_JWT_ISSUER)
    assert claims["sub"] == str(member.pk)
    ok(describe_self(token, member))
    row = SigningKey.objects.get(kid=header["kid"])
    private = keys.serialization.load_pem_private_key(
        keys.crypto.decrypt(row.private_key_encrypted).encode(), password=None
    )
    assert (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
        == row.public_key
    )
    assert "PRIVATE" not in row.private_key_encrypted  # encrypted at rest


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


def current_kid(algorithm: str | None = None) -> str:
    return SigningKey.objects.get(
        algorithm=algorithm or settings.IAM_JWT_ALGORITHM, retired_at__isnull=True
    ).kid


def rotate(django_capture_on_commit_callbacks) -> str:
    """The new key of IAM_JWT_ALGORITHM (RS256's is rotated with it)."""
    with django_capture_on_commit_callbacks(execute=True):
        call_command("rotate_signing_key", stdout=open("/dev/null", "w"))  # noqa: SIM115
    return current_kid()


def session_kids(document: dict) -> set[str]:
    return {key["kid"] for key in document["keys"] if key["alg"] == settings.IAM_JWT_ALGORITHM}


def test_rotation_signs_with_the_new_key_and_keeps_the_old_one_until_its_tokens_expire(
    api, member, algorithm, django_capture_on_commit_callbacks, monkeypatch
):
    old_token = client_for(member).token
    old_kid = jwt.get_unverified_header(old_token)["kid"]
    new_kid = rotate(django_capture_on_commit_callbacks)
    assert new_kid != old_kid
    new_token = client_for(member).token
    assert jwt.get_unverified_header(new_token)["kid"] == new_kid
    assert session_kids(jwks(api).json()) == {old_kid, new_kid}
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
    assert session_kids(jwks(api).json()) == {new_kid}
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

    def entries(**filters) -> dict:
        rows = AuditEntry.objects.filter(action="signing_key.rotate", **filters)
        return {entry.changes["algorithm"]: entry for entry in rows}

    client_for(member)  # the first key of IAM_JWT_ALGORITHM
    first = rotate(django_capture_on_commit_callbacks)
    by_command = entries()
    assert set(by_command) == {algorithm, "RS256"}  # the RS256 key had none yet: nothing retired
    assert {(entry.actor_kind, entry.actor_id) for entry in by_command.values()} == {("command", None)}
    assert by_command[algorithm].changes["kid"]["after"] == first
    assert by_command["RS256"].changes["kid"] == {"before": [], "after": current_kid("RS256")}
    rs256 = current_kid("RS256")
    second = {key.algorithm: key.kid for key in rotate_signing_key(actor=operator)}
    by_operator = entries(actor_id=operator.pk)
    assert by_operator[algorithm].changes == {
        "kid": {"before": [first], "after": second[algorithm]},
        "algorithm": algorithm,
    }
    assert by_operator["RS256"].changes == {
        "kid": {"before": [rs256], "after": second["RS256"]},
        "algorithm": "RS256",
    }


def test_rotate_under_hs256_rotates_the_rs256_key(api, django_capture_on_commit_callbacks):
    [before] = jwks(api).json()["keys"]
    with django_capture_on_commit_callbacks(execute=True):
        call_command("rotate_signing_key", stdout=open("/dev/null", "w"))  # noqa: SIM115
    after = current_kid("RS256")
    assert after != before["kid"]
    assert {key["kid"] for key in jwks(api).json()["keys"]} == {before["kid"], after}
    assert not SigningKey.objects.exclude(algorithm="RS256").exists()


def test_admin_rotate_action(admin_web, member, algorithm, django_capture_on_commit_callbacks):
    old_kid = jwt.get_unverified_header(client_for(member).token)["kid"]
    page = admin_web.get("/admin/authn/signingkey/")
    assert page.status_code == 200 and old_kid in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(
            "/admin/authn/signingkey/", {"action": "rotate", "_selected_action": [old_kid]}, follow=True
        )
    assert response.status_code == 200
    current = current_kid()
    assert current != old_kid and "PRIVATE" not in response.content.decode()
    assert jwt.get_unverified_header(client_for(member).token)["kid"] == current


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
