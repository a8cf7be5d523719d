"""SCIM provisioning against the live service (issue 27), driven by SCIM software this team did not
write: `scim2-client` provisions, updates, deactivates and deprovisions Users and Groups over HTTP, and
`scim2-tester` checks the service against RFC 7643/7644. A deactivated or deprovisioned member is
refused by `clients/validate` at once in every web process (the session's gunicorn and one of this
module's, sharing nothing but PostgreSQL and Redis), however warm their caches were."""

import httpx2
import pytest
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_models import Error, PatchOp, PatchOperation
from scim2_tester import check_server

from tests.live.api import add_member, create_client, create_role, create_workspace, err, ok, unique
from tests.scim.test_compliance import directory_models, failures

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


def directory(base: str, workspace: str, token: str) -> SyncSCIMClient:
    http = httpx2.Client(
        base_url=f"{base}/scim/v2/{workspace}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    client = SyncSCIMClient(http)
    client.provider = directory_models(client)
    return client


def models(client: SyncSCIMClient):
    found = {model.__name__: model for model in client.provider.models}
    return found["User"], found["Group"]


def test_a_published_client_provisions_updates_deactivates_and_deprovisions(live, tiers):
    _, _, operator = live.bootstrap_operator()
    workspace = create_workspace(live, operator)["id"]
    token = scim_token(live, operator, workspace)
    scim = directory(live.url, workspace, token)
    User, Group = models(scim)

    # A person who signs in, already a member (added by hand), and the client service checking them.
    person = live.register()
    add_member(live, operator, workspace, person["account"]["id"])
    readers = create_role(live, operator, workspace)
    client = create_client(live, operator, workspace)

    def validate(base: str) -> bool:
        body = {"client_id": client["id"], "client_secret": client["secret"], "token": person["access_token"]}
        return ok(live.post("/clients/validate", body, base=base))["authorized"]

    # Provisioning a new person, and finding the existing one by userName.
    created = scim.create(
        User(user_name=f"{unique('new')}@example.com", display_name="New Person", active=True)
    )
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
    results = check_server(directory(live.url, workspace, scim_token(live, operator, workspace)))
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
