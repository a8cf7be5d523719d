"""A workspace's MFA policy (docs/security.md#second-factors-and-the-workspace-mfa-policy) across every web
worker: turning `mfa_required` on refuses a one-factor session at once everywhere, over `X-Workspace` and
`clients/validate` alike, after both workers cached the workspace; a two-factor session and another workspace
carry on."""

import time

import pyotp

from tests.live.api import create_client, create_workspace, err, ok
from tests.live.conftest import PASSWORD

MFA = "mfa required by this workspace"
FIRST = "use a second factor in this session before requiring one"
CALLS = 12  # spread over both workers


def test_turning_the_policy_on_holds_at_once_in_every_worker(live):
    ada = live.register()
    bob = live.register()
    one_factor = ada["access_token"]
    acme = create_workspace(live, one_factor)["id"]
    beta = create_workspace(live, bob["access_token"])["id"]
    client = create_client(live, one_factor, acme)
    secret = ok(live.post("/auth/mfa/totp/enroll", {}, token=one_factor))["secret"]
    ok(live.post("/auth/mfa/totp/confirm", {"code": pyotp.TOTP(secret).now()}, token=one_factor))
    challenge = ok(live.post("/auth/login", {"email": ada["account"]["email"], "password": PASSWORD}))
    code = pyotp.TOTP(secret).at(time.time() + 30)  # the confirming code's step is spent
    two_factors = ok(live.post("/auth/mfa/verify", {"mfa_token": challenge["mfa_token"], "code": code}))[
        "access_token"
    ]

    def validate(token: str) -> dict:
        body = {"client_id": client["id"], "client_secret": client["secret"], "token": token}
        return ok(live.post("/clients/validate", body))

    for _ in range(CALLS):  # every worker has the workspace and the grants cached
        ok(live.post("/projects/list", {}, token=one_factor, workspace=acme))
        assert validate(one_factor)["authorized"] is True

    turn_on = {"id": acme, "mfa_required": True}
    err(
        live.post("/workspace/update", turn_on, token=one_factor), 403, FIRST
    )  # no owner locks themselves out
    ok(live.post("/workspace/update", turn_on, token=two_factors))
    for _ in range(CALLS):
        err(live.post("/projects/list", {}, token=one_factor, workspace=acme), 403, MFA)
        assert validate(one_factor)["reason"] == "mfa_required"
        ok(live.post("/projects/list", {}, token=two_factors, workspace=acme))
        assert validate(two_factors)["authorized"] is True
        ok(live.post("/projects/list", {}, token=bob["access_token"], workspace=beta))
