"""Several web processes sharing nothing but PostgreSQL and Redis (docs/security.md#tokens,
docs/integration.md#validate-each-token-clientsvalidate, 13 and 14): a revocation, a disabled account, a
rotated client secret and the login throttles hold on every request whichever process answers, and the
per-address throttle counts the connection's address, never a client-sent `X-Forwarded-For`."""

import subprocess
import sys

import pytest

from tests.live.api import add_member, create_client, create_workspace, err, ok, unique
from tests.live.conftest import BASE_DIR, PASSWORD

REQUESTS = 32
UNAUTHORIZED = "Authentication required or invalid credentials."


@pytest.fixture(scope="module")
def tiers(live):
    """The session's gunicorn (2 workers) and a second gunicorn of its own: requests alternate."""
    other = live.start_web(workers=1)
    yield [live.url, other.url]
    other.stop()


def each(tiers, n: int = REQUESTS):
    for i in range(n):
        yield tiers[i % len(tiers)]


def test_a_revoked_token_is_refused_by_every_process(live, tiers):
    token = live.register()["access_token"]
    for base in tiers:  # each process has read (and may have cached) the session as valid
        ok(live.post("/workspace/list", token=token, base=base))
    ok(live.post("/auth/revoke", token=token, base=tiers[1]))
    for base in each(tiers):
        err(live.post("/workspace/list", token=token, base=base), 401, UNAUTHORIZED)


@pytest.fixture
def tenant(live, tiers):
    """A workspace with a client and an active member whose token the client validates."""
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    client = create_client(live, operator, workspace)
    member = live.register()
    add_member(live, operator, workspace, member["account"]["id"])
    return {"operator": operator, "workspace": workspace, "client": client, "member": member}


def validate(live, tenant, base, secret=None) -> dict:
    body = {
        "client_id": tenant["client"]["id"],
        "client_secret": secret or tenant["client"]["secret"],
        "token": tenant["member"]["access_token"],
    }
    return ok(live.post("/clients/validate", body, base=base))


def test_a_disabled_account_is_unauthorized_at_every_process(live, tiers, tenant):
    for base in tiers:
        assert validate(live, tenant, base)["authorized"] is True
    account_id = tenant["member"]["account"]["id"]
    ok(live.post("/accounts/update", {"id": account_id, "enabled": False}, token=tenant["operator"]))
    for base in each(tiers):
        answer = validate(live, tenant, base)
        assert answer["authorized"] is False, answer
        assert answer["reason"] in ("account_disabled", "token_revoked"), answer


def test_an_old_client_secret_fails_at_every_process_after_regeneration(live, tiers, tenant):
    old = tenant["client"]["secret"]
    for base in tiers:
        assert validate(live, tenant, base, old)["authorized"] is True
    new = ok(
        live.post(
            "/clients/regenerate-secret",
            {"id": tenant["client"]["id"]},
            token=tenant["operator"],
            workspace=tenant["workspace"],
        )
    )["secret"]
    for base in each(tiers):
        answer = validate(live, tenant, base, old)
        assert (answer["authorized"], answer["reason"]) == (False, "invalid_client"), answer
    assert validate(live, tenant, tiers[0], new)["authorized"] is True


def test_a_deleted_workspace_s_client_is_invalid_at_every_process_at_once(live, tiers, tenant):
    """The workspace's cascade takes its client: every process refuses it right after the delete answers,
    though each had it cached, and `clients/events` no longer serves the workspace's log to it."""
    pair = {"client_id": tenant["client"]["id"], "client_secret": tenant["client"]["secret"]}
    for base in each(tiers, 6):
        assert validate(live, tenant, base)["authorized"] is True
        ok(live.post("/clients/events", pair, base=base))
    ok(live.post("/workspace/delete", {"id": tenant["workspace"]}, token=tenant["operator"]))
    for base in each(tiers):
        answer = validate(live, tenant, base)
        assert (answer["authorized"], answer["reason"]) == (False, "invalid_client"), answer
        err(live.post("/clients/events", pair, base=base), 401, "invalid client")


def login(live, email: str, password: str, **kwargs):
    return live.post("/auth/login", {"email": email, "password": password}, **kwargs)


def test_five_failures_for_one_email_throttle_it_across_processes(live, tiers):
    email = live.register()["account"]["email"]
    for base in each(tiers, 5):
        err(login(live, email, "wrong-password", base=base, source="127.0.0.20"), 401)
    for base in tiers:  # the right password too: the password is not even checked
        response = err(login(live, email, PASSWORD, base=base, source="127.0.0.20"), 429)
        assert response["message"] == "too many failed login attempts"


def test_varied_forwarded_for_headers_do_not_escape_the_address_limit(live):
    statuses = [
        login(
            live,
            f"{unique('nobody')}@example.com",
            "wrong-password",
            source="127.0.0.21",
            headers={"X-Forwarded-For": f"198.51.100.{i}"},
        ).status_code
        for i in range(60)
    ]
    assert statuses == [401] * 50 + [429] * 10, statuses


def test_failures_sent_as_another_address_do_not_lock_it_out(live):
    victim = live.register()["account"]["email"]
    for _ in range(50):
        response = login(
            live,
            f"{unique('nobody')}@example.com",
            "wrong-password",
            source="127.0.0.22",
            headers={"X-Forwarded-For": "127.0.0.2"},
        )
        assert response.status_code in (401, 429), response.text
    ok(login(live, victim, PASSWORD, source="127.0.0.2"))


@pytest.mark.parametrize("setting", ["REDIS_URL", "SECRET_KEY", "IAM_JWT_SIGNING_KEY"])
def test_the_service_refuses_to_start_without_a_shared_setting(live, setting):
    """docs/operations.md#required-settings: with DEBUG off, per-process caches and default keys are refused
    at start-up."""
    env = {key: value for key, value in live.env.items() if key != setting}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); import iam.wsgi"],
        env=env,
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode != 0, f"started without {setting}"
    assert setting in started.stderr, started.stderr[-2000:]
