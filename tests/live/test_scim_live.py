"""SCIM provisioning against the live service, driven by SCIM software this team did not write:
`scim2-client` provisions, updates, deactivates and deprovisions Users and Groups over HTTP, and
`scim2-tester` checks the service against RFC 7643/7644. A deactivated or deprovisioned member is
refused by `clients/validate` at once in every web process (the session's gunicorn and one of this
module's, sharing nothing but PostgreSQL and Redis), however warm their caches were. Then what the
fourth attack found, against gunicorn and PostgreSQL: a directory mints no account outside its
workspace's verified domains, never sees or activates an invitation, and neither a PATCH of 1,000
operations nor a page of large Groups holds a worker or passes the byte budget."""

import json
import threading
import time

import httpx2
import psycopg
import pytest
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_models import Error, PatchOp, PatchOperation
from scim2_tester import check_server

from tests.live.api import (
    META,
    add_member,
    create_client,
    create_role,
    create_workspace,
    err,
    ok,
    unique,
    validating_tenant,
)
from tests.scim.test_compliance import directory_models, failures
from tests.sso.stand_ins import OpenIdProvider

REQUESTS = 16


@pytest.fixture(scope="module")
def tiers(live):
    other = live.start_web(workers=1)
    yield [live.url, other.url]
    other.stop()


def each(tiers, n: int = REQUESTS):
    for i in range(n):
        yield tiers[i % len(tiers)]


def scim_token(live, operator: str, workspace: str) -> str:
    return ok(
        live.post("/scim-tokens/create", {"name": unique("okta")}, token=operator, workspace=workspace)
    )["token"]


def directory(base: str, workspace: str, token: str, domain: str) -> SyncSCIMClient:
    http = httpx2.Client(
        base_url=f"{base}/scim/v2/{workspace}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    client = SyncSCIMClient(http)
    client.provider = directory_models(client, domain)
    return client


def verified_domain(live, operator: str, workspace: str) -> str:
    """A new domain of the workspace's SSO connection (to a stand-in provider, read once for its
    discovery), verified by an operator's word: the directory provisions its addresses only."""
    domain = f"{unique('d')}.test"
    provider = OpenIdProvider()
    try:
        body = {
            "name": unique("idp"),
            "issuer": provider.issuer,
            "client_id": provider.client_id,
            "client_secret": provider.client_secret,
            "domains": [domain],
            "default_role_ids": [],
            "tags": [],
            "meta": META,
        }
        ok(live.post("/sso/create", body, token=operator, workspace=workspace))
    finally:
        provider.close()
    slug = ok(live.post("/workspace/describe", {"id": workspace}, token=operator))["slug"]
    done = live.manage("verify_domain", "--workspace", slug, "--domain", domain)
    assert done.returncode == 0, done.stdout + done.stderr
    return domain


def scim_call(live, workspace: str, token: str, method: str, path: str, body=None, **kwargs):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/scim+json"}
    raw = None if body is None else json.dumps(body)
    return live.request(method, f"/scim/v2/{workspace}{path}", raw=raw, headers=headers, **kwargs)


def models(client: SyncSCIMClient):
    found = {model.__name__: model for model in client.provider.models}
    return found["User"], found["Group"]


def test_a_published_client_provisions_updates_deactivates_and_deprovisions(live, tiers):
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    token = scim_token(live, operator, workspace)
    domain = verified_domain(live, operator, workspace)
    scim = directory(live.url, workspace, token, domain)
    User, Group = models(scim)

    # A person of the workspace's domain who signs in, already a member (added by hand), and the client
    # service checking them.
    person = live.register(f"{unique('person')}@{domain}")
    add_member(live, operator, workspace, person["account"]["id"])
    readers = create_role(live, operator, workspace)
    client = create_client(live, operator, workspace)

    def validate(base: str) -> bool:
        body = {"client_id": client["id"], "client_secret": client["secret"], "token": person["access_token"]}
        return ok(live.post("/clients/validate", body, base=base))["authorized"]

    # Provisioning a new person, and finding the existing one by userName.
    created = scim.create(User(user_name=f"{unique('new')}@{domain}", display_name="New Person", active=True))
    assert created.id and created.active is True
    listed = scim.query(User, query_parameters={"filter": f'userName eq "{person["account"]["email"]}"'})
    assert listed.total_results == 1
    found = listed.resources[0]
    assert found.id == person["account"]["id"] and found.active is True

    # Updating: the whole User (PUT), then a Group with both people, then its members by PATCH.
    created.display_name = "Renamed Person"
    replaced = scim.replace(created)
    assert replaced.display_name == "Renamed Person"
    group = scim.create(Group(display_name=unique("engineering")))
    add = PatchOperation(op="add", path="members", value=[{"value": found.id}, {"value": created.id}])
    patched = scim.modify(Group, group.id, PatchOp[Group](operations=[add]))
    assert sorted(member.value for member in patched.members) == sorted([found.id, created.id])
    remove = PatchOperation(op="remove", path=f'members[value eq "{created.id}"]')
    patched = scim.modify(Group, group.id, PatchOp[Group](operations=[remove]))
    assert [member.value for member in patched.members] == [found.id]
    # An existing role of the workspace is a Group too.
    assert scim.query(Group, readers["id"]).display_name == readers["name"]

    for base in each(tiers):  # every worker has read (and may have cached) the member's grants
        assert validate(base) is True

    # Deactivating: refused at once everywhere; reactivating: admitted again.
    deactivate = PatchOperation(op="replace", path="active", value=False)
    assert scim.modify(User, found.id, PatchOp[User](operations=[deactivate])).active is False
    for base in each(tiers):
        assert validate(base) is False
    err(live.post("/projects/list", {}, token=person["access_token"], workspace=workspace), 403)
    activate = PatchOperation(op="replace", path="active", value=True)
    assert scim.modify(User, found.id, PatchOp[User](operations=[activate])).active is True
    for base in each(tiers):
        assert validate(base) is True

    # Deprovisioning: the membership goes at once everywhere; the account stays.
    assert scim.delete(User, found.id) is None
    for base in each(tiers):
        assert validate(base) is False
    assert isinstance(scim.query(User, found.id, raise_scim_errors=False, expected_status_codes=None), Error)
    ok(live.post("/workspace/list", {}, token=person["access_token"]))
    assert scim.delete(Group, group.id) is None
    assert scim.delete(User, created.id) is None


def test_the_compliance_checker_finds_nothing_wrong(live):
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    domain = verified_domain(live, operator, workspace)
    results = check_server(directory(live.url, workspace, scim_token(live, operator, workspace), domain))
    assert len(results) > 20
    assert not failures(results), failures(results)


def test_one_workspace_s_token_never_reaches_another(live, tiers):
    _, _, operator = live.bootstrap_operator()
    first, second = (create_workspace(live, operator)["id"] for _ in range(2))
    token = scim_token(live, operator, first)
    for base in tiers:
        crossed = live.get(
            f"/scim/v2/{second}/Users", headers={"Authorization": f"Bearer {token}"}, base=base
        )
        assert crossed.status_code == 401 and crossed.json()["status"] == "401"
        err(live.post("/roles/list", {}, token=token, workspace=first, base=base), 401)


# What the fourth attack found


ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


def scim_error(response, status: int, scim_type: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:500])
    body = response.json()
    assert body["schemas"] == [ERROR] and body["status"] == str(status) and body.get("scimType") == scim_type
    return body


def test_a_self_registered_account_mints_no_account_through_its_own_directory(live):
    """An unconfirmed account creates a workspace and a SCIM token (it holds `*` there): `POST /Users` for
    someone else's address answers 400 whether or not that address has an account, creates nothing, and
    the owner of the address registers as usual."""
    mallory = live.register(f"{unique('mallory')}@evil.test")["access_token"]
    workspace = create_workspace(live, mallory)["id"]
    token = scim_token(live, mallory, workspace)
    taken = live.register(f"{unique('cfo')}@bigcorp.test")["account"]["email"]
    free = f"{unique('ceo')}@bigcorp.test"
    answers = []
    for address in (free, taken):
        body = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": address}
        response = scim_call(live, workspace, token, "POST", "/Users", body)
        detail = scim_error(response, 400, "invalidValue")["detail"]
        assert detail == "userName must be in a verified domain of this workspace"
        answers.append(response.content)
    assert answers[0] == answers[1]
    listed = scim_call(live, workspace, token, "GET", "/Users")
    assert listed.status_code == 200 and listed.json()["totalResults"] == 0
    assert live.register(free)["account"]["email"] == free


def test_an_invitation_is_neither_seen_nor_activated_by_the_directory(live, tiers):
    """A tenant invites an account id it learnt, then asks its directory to show and activate it: 404
    each time, and the account's token still validates at none of the tenant's clients."""
    tenant = live.register()["access_token"]
    workspace = create_workspace(live, tenant)["id"]
    token = scim_token(live, tenant, workspace)
    client = create_client(live, tenant, workspace)
    victim = live.register()
    invited = ok(
        live.post(
            "/memberships/create",
            {
                "account_id": victim["account"]["id"],
                "scope": "workspace",
                "status": "active",
                "role_ids": [],
                "tags": [],
                "meta": META,
            },
            token=tenant,
            workspace=workspace,
        )
    )
    assert invited["status"] == "invited"
    path = f"/Users/{victim['account']['id']}"
    for base in tiers:
        got = scim_call(live, workspace, token, "GET", path, base=base)
        assert scim_error(got, 404)["detail"] == "user not found"
        assert victim["account"]["email"] not in got.text
        patch = {
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "Replace", "path": "active", "value": "True"}],
        }
        scim_error(scim_call(live, workspace, token, "PATCH", path, patch, base=base), 404)
        listed = scim_call(live, workspace, token, "GET", "/Users", base=base)
        assert listed.json()["totalResults"] == 0
        body = {"client_id": client["id"], "client_secret": client["secret"], "token": victim["access_token"]}
        assert ok(live.post("/clients/validate", body, base=base))["authorized"] is False
    mine = ok(live.post("/invitations/mine", {}, token=victim["access_token"]))
    assert [item["status"] for item in mine["invitations"]] == ["pending"]  # still the victim's to accept


SEED_USERS = """
from django.db import transaction
from django.utils import timezone
from accounts.models import Account
from rbac.models import Membership, Role
workspace, domain, n, *role_ids = {args!r}
now = timezone.now()
with transaction.atomic():
    accounts = Account.objects.bulk_create(
        [Account(email=f"m{{i}}@{{domain}}", name=f"m{{i}}", verified=True) for i in range(int(n))],
        batch_size=2000,
    )
    memberships = Membership.objects.bulk_create(
        [Membership(workspace_id=workspace, account=a, scope="workspace", status="active", accepted_at=now)
         for a in accounts], batch_size=2000
    )
    Holding = Membership.roles.through
    Holding.objects.bulk_create(
        [Holding(membership_id=m.pk, role_id=r) for r in role_ids for m in memberships], batch_size=5000
    )
print("\\n".join(str(a.pk) for a in accounts))
"""


def seed_users(live, workspace: str, domain: str, n: int, role_ids: list[str]) -> list[str]:
    """`n` Users of the workspace's domain, each holding the roles (written straight into the database:
    through the service they are thousands of requests)."""
    code = SEED_USERS.format(args=[workspace, domain, str(n), *role_ids])
    done = live.manage("shell", "-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-n:]


def test_large_groups_answer_within_the_budget_and_a_thousand_operations_do_not_hold_a_worker(live, tiers):
    """`GET /Groups?count=50` of Groups of 10,001 members once answered 4.97 MB whole; a PATCH of 3,500
    operations ran past 30 s and got its worker killed. Now a Group answers 10,000 members, a page stops
    before the Group that would pass 4 MiB (four such Groups take two pages), a PATCH holds at most 1,000
    operations, and 1,000 operations on 1,000 people change each once in a few statements. Another
    tenant's `clients/validate` is timed meanwhile (printed)."""
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    domain = verified_domain(live, operator, workspace)
    token = scim_token(live, operator, workspace)
    big = [create_role(live, operator, workspace)["id"] for _ in range(4)]  # some 1.3 MB each
    users = seed_users(live, workspace, domain, 10_001, big)

    one = scim_call(live, workspace, token, "GET", f"/Groups/{big[0]}", timeout=60)
    assert one.status_code == 200 and len(one.json()["members"]) == 10_000
    seen, start, budget, pages = [], 1, 4 * 1024 * 1024, 0
    while True:
        pages += 1
        page = scim_call(live, workspace, token, "GET", f"/Groups?count=50&startIndex={start}", timeout=60)
        assert page.status_code == 200 and len(page.content) <= budget + 1024, len(page.content)
        body = page.json()
        held, total = body["itemsPerPage"], body["totalResults"]
        print(f"Groups page at {start}: {held} of {total}, {len(page.content)} bytes")
        seen += [group["id"] for group in body["Resources"]]
        assert body["itemsPerPage"] >= 1
        if start + body["itemsPerPage"] > body["totalResults"]:
            break
        start += body["itemsPerPage"]
    assert [pk for pk in seen if pk in big] == big and pages > 1

    group = create_role(live, operator, workspace)["id"]
    adds = [{"op": "add", "path": "members", "value": [{"value": pk}]} for pk in users[:1000]]
    patch = {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": adds}
    too_many = {**patch, "Operations": [*adds, adds[0]]}
    scim_error(scim_call(live, workspace, token, "PATCH", f"/Groups/{group}", too_many), 400, "tooMany")

    validate = validating_tenant(live)
    timings: list[float] = []
    stop = False

    def validating() -> None:
        while not stop:
            started = time.monotonic()
            assert live.post("/clients/validate", validate, timeout=60).status_code == 200
            timings.append(time.monotonic() - started)

    watcher = threading.Thread(target=validating, daemon=True)
    watcher.start()
    try:
        started = time.monotonic()
        done = scim_call(
            live, workspace, token, "PATCH", f"/Groups/{group}?excludedAttributes=members", patch, timeout=60
        )
        elapsed = time.monotonic() - started
    finally:
        stop = True
        watcher.join(timeout=60)
    assert done.status_code == 200, done.text[:500]
    members = scim_call(live, workspace, token, "GET", f"/Groups/{group}", timeout=60).json()["members"]
    assert sorted(member["value"] for member in members) == sorted(users[:1000])
    timings.sort()
    print(
        f"PATCH of 1,000 operations on 1,000 people: {elapsed:.2f} s; another tenant's validate meanwhile: "
        f"{len(timings)} calls, max {max(timings, default=0) * 1000:.0f} ms"
    )
    with psycopg.connect(live.env["DATABASE_URL"], autocommit=True) as conn:
        entries = conn.execute(
            "SELECT count(*) FROM iam_auditentry WHERE action = 'membership.update' AND workspace_id = %s",
            (workspace,),
        ).fetchone()[0]
    assert entries == 1000
