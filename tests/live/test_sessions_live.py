"""One session ended (docs/api.md#sessions): refused at once by every web process, on Bearer calls and in
`clients/validate`, while the account's other session goes on, however warm each process's cache was.
Two gunicorn processes (the session's, with 2 workers, and one of this module's) share nothing but
PostgreSQL and Redis; each request opens a new connection, so consecutive calls spread over the workers."""

import base64
import json

import pytest

from tests.live.api import add_member, create_client, create_workspace, err, ok
from tests.live.conftest import PASSWORD

REQUESTS = 32
UNAUTHORIZED = "Authentication required or invalid credentials."


@pytest.fixture(scope="module")
def tiers(live):
    other = live.start_web(workers=1)
    yield [live.url, other.url]
    other.stop()


def each(tiers, n: int = REQUESTS):
    for i in range(n):
        yield tiers[i % len(tiers)]


def sid_of(token: str) -> str:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sid"]


def test_one_revoked_session_is_refused_everywhere_at_once_while_the_other_lives(live, tiers):
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    client = create_client(live, operator, workspace)
    first = live.register()
    email, account_id = first["account"]["email"], first["account"]["id"]
    add_member(live, operator, workspace, account_id)
    second = ok(live.post("/auth/login", {"email": email, "password": PASSWORD}))
    assert sid_of(first["access_token"]) != sid_of(second["access_token"])

    def validate(token: str, base: str) -> dict:
        body = {"client_id": client["id"], "client_secret": client["secret"], "token": token}
        return ok(live.post("/clients/validate", body, base=base))

    # every worker reads (and keeps in its memory) both sessions as valid
    for base in each(tiers):
        for session in (first, second):
            ok(live.post("/workspace/list", token=session["access_token"], base=base))
            assert validate(session["access_token"], base)["authorized"] is True

    revoked = ok(
        live.post("/sessions/revoke", {"id": sid_of(second["access_token"])}, token=first["access_token"])
    )
    assert revoked == {"id": sid_of(second["access_token"]), "revoked": True}

    for base in each(tiers):
        err(live.post("/workspace/list", token=second["access_token"], base=base), 401, UNAUTHORIZED)
        answer = validate(second["access_token"], base)
        assert (answer["authorized"], answer["reason"]) == (False, "token_revoked"), answer
        ok(live.post("/workspace/list", token=first["access_token"], base=base))
        assert validate(first["access_token"], base)["authorized"] is True
    err(live.post("/auth/refresh", token=second["refresh_token"]), 401, UNAUTHORIZED)
    ok(live.post("/auth/refresh", token=first["refresh_token"]))
    listed = ok(live.post("/sessions/list", token=first["access_token"]))["sessions"]
    assert [row["id"] for row in listed] == [sid_of(first["access_token"])]
