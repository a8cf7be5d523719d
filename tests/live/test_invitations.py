"""Invitations by e-mail against the running service (docs/api.md#invitations, #quotas-and-budgets):
the worker mails the link after commit, the pre-registration hijack defence ends the squatter's session
and password, and the pending-invitations quota holds exactly under concurrent creates on two gunicorn
processes."""

import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.api import create_role, create_workspace, err, ok, unique

UNAUTHORIZED = "Authentication required or invalid credentials."
NEW_PASSWORD = "the owner's own passphrase"


def invitation_token(live, address: str) -> str:
    def mailed():
        for message in live.emails_to(address):
            body = message.get_body(preferencelist=("plain",)).get_content()
            found = re.search(r"/accept-invitation\?token=(\S+)", body)
            if found:
                return found.group(1)
        return None

    return live.wait_for(mailed, what=f"the invitation e-mail to {address}")


def test_invite_mail_accept_and_the_squatter_is_shut_out(live):
    owner = live.register()
    token = owner["access_token"]
    workspace = create_workspace(live, token)["id"]
    role = create_role(live, token, workspace)
    victim = f"{unique('victim')}@example.com"
    squatter = live.register(email=victim)  # registered without the mailbox: never verified
    ok(live.post("/workspace/list", token=squatter["access_token"]))

    body = {"email": victim, "scope": "workspace", "role_ids": [role["id"]]}
    invitation = ok(live.post("/invitations/create", body, token=token, workspace=workspace))
    assert invitation["status"] == "pending"
    link = invitation_token(live, victim)
    err(live.post("/invitations/accept", {"token": link}), 400, "password required")
    answer = ok(live.post("/invitations/accept", {"token": link, "password": NEW_PASSWORD}))
    assert answer["invitation"]["status"] == "accepted" and answer["membership"]["status"] == "active"

    err(live.post("/workspace/list", token=squatter["access_token"]), 401, UNAUTHORIZED)
    refresh = {"Authorization": f"Bearer {squatter['refresh_token']}"}
    err(live.post("/auth/refresh", headers=refresh), 401)
    err(live.post("/auth/login", {"email": victim, "password": "correct horse battery staple"}), 401)
    ok(live.post("/auth/login", {"email": victim, "password": NEW_PASSWORD}))
    mine = ok(live.post("/workspace/list", token=answer["access_token"]))["workspaces"]
    assert [item["id"] for item in mine] == [workspace]
    err(
        live.post("/invitations/accept", {"token": link, "password": NEW_PASSWORD}),
        404,
        "invitation not found",
    )
    listed = ok(
        live.post(
            "/invitations/list",
            {"filter": {"fields": {"status": "accepted"}}},
            token=token,
            workspace=workspace,
        )
    )
    assert [item["id"] for item in listed["invitations"]] == [invitation["id"]]


QUOTA = 5
RACERS = 20


@pytest.fixture(scope="module")
def small_quota(live):
    """A web tier of its own whose workspaces may hold QUOTA pending invitations."""
    live.env["IAM_QUOTA_PENDING_INVITATIONS"] = str(QUOTA)
    try:
        web = live.start_web(workers=2)
    finally:
        del live.env["IAM_QUOTA_PENDING_INVITATIONS"]
    yield web.url
    web.stop()


def test_the_pending_invitations_quota_is_exact_under_concurrent_creates(live, small_quota):
    owner = live.register()["access_token"]
    workspace = create_workspace(live, owner)["id"]
    start = threading.Barrier(RACERS)

    def create(i: int):
        start.wait()
        body = {"email": f"racer-{i}-{unique('x')}@example.com", "scope": "workspace", "role_ids": []}
        return live.post("/invitations/create", body, token=owner, workspace=workspace, base=small_quota)

    with ThreadPoolExecutor(RACERS) as pool:
        responses = list(pool.map(create, range(RACERS)))
    assert Counter(response.status_code for response in responses) == {200: QUOTA, 403: RACERS - QUOTA}
    refused = {response.json()["message"] for response in responses if response.status_code == 403}
    assert refused == {f"quota reached: pending invitations ({QUOTA})"}


def test_a_disabled_account_accepts_nothing_and_the_log_keeps_the_invitees_client_out(live):
    """Against the running service: an account an operator disabled cannot accept an invitation mailed to
    its address (403), and the inviting workspace's audit log holds no address, IP or user agent of the
    people who accepted or declined, whatever their browser sent."""
    operator_token = live.bootstrap_operator()[2]
    owner = live.register()["access_token"]
    workspace = create_workspace(live, owner)["id"]
    role = create_role(live, owner, workspace)
    browser = {"User-Agent": f"invitee-browser-{unique('ua')}"}

    disabled = f"{unique('disabled')}@example.com"
    account = live.register(email=disabled)["account"]
    ok(live.post("/accounts/update", {"id": account["id"], "enabled": False}, token=operator_token))
    ok(live.post("/invitations/create", invite_body(disabled, role), token=owner, workspace=workspace))
    link = invitation_token(live, disabled)
    err(
        live.post("/invitations/accept", {"token": link, "password": NEW_PASSWORD}, headers=browser),
        403,
        "account disabled",
    )

    accepting, declining = f"{unique('yes')}@example.com", f"{unique('no')}@example.com"
    for address in (accepting, declining):
        ok(live.post("/invitations/create", invite_body(address, role), token=owner, workspace=workspace))
    body = {"token": invitation_token(live, accepting), "password": NEW_PASSWORD, "name": "Yes"}
    ok(live.post("/invitations/accept", body, headers=browser))
    declined = ok(
        live.post("/invitations/decline", {"token": invitation_token(live, declining)}, headers=browser)
    )
    assert declined["status"] == "declined"

    entries = ok(live.post("/audit/list", {"options": {"limit": 1000}}, token=owner, workspace=workspace))[
        "entries"
    ]
    by_invitees = [
        entry for entry in entries if entry["action"] in ("invitation.accept", "invitation.decline")
    ]
    assert sorted(entry["action"] for entry in by_invitees) == ["invitation.accept", "invitation.decline"]
    for entry in by_invitees:
        assert (entry["ip"], entry["user_agent"]) == (None, ""), entry
        assert accepting not in str(entry["changes"]) and declining not in str(entry["changes"]), entry
    assert all(entry["user_agent"] != browser["User-Agent"] for entry in entries)


def invite_body(address: str, role: dict) -> dict:
    return {"email": address, "scope": "workspace", "role_ids": [role["id"]]}
