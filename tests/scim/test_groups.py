"""SCIM Groups: the workspace's roles (`displayName` = the role's name); a Group's members hold the role
on their workspace membership. PATCH with and without paths, member value filters, Entra ID's forms,
the quotas, and another workspace's roles and accounts out of reach."""

import json

import pytest

from iam.models import AuditEntry, Event
from rbac.models import Membership, Role
from tests.conftest import client_for, err, ok
from tests.factories import AccountFactory, MembershipFactory, RoleFactory

from .conftest import GROUP, scim_err, scim_ok, user_body


@pytest.fixture
def users(scim):
    return [scim_ok(scim.post("/Users", user_body(f"g{n}@acme.test")), 201)["id"] for n in range(3)]


def roles_of(workspace, account_id) -> set[str]:
    membership = Membership.objects.get(workspace=workspace, account_id=account_id, scope="workspace")
    return {role.name for role in membership.roles.all()}


def members(group) -> list[str]:
    return sorted(member["value"] for member in group.get("members", []))


def test_creating_a_group_creates_a_role_with_its_members(scim, workspace, users):
    body = {"schemas": [GROUP], "displayName": "Engineering", "members": [{"value": users[0]}]}
    response = scim.post("/Groups", body)
    group = scim_ok(response, 201)
    assert group["schemas"] == [GROUP] and group["displayName"] == "Engineering"
    assert response["Location"].endswith(f"/Groups/{group['id']}")
    role = Role.objects.get(pk=group["id"], workspace=workspace)
    assert role.name == "Engineering" and not role.permissions.exists()
    assert members(group) == [users[0]]
    assert group["members"][0]["$ref"].endswith(f"/Users/{users[0]}")
    assert roles_of(workspace, users[0]) == {"Engineering"}
    assert AuditEntry.objects.get(action="role.create").actor_kind == "scim"
    assert scim_ok(scim.get(f"/Groups/{group['id']}")) == group


def test_a_group_name_is_unique_and_required(scim):
    scim_ok(scim.post("/Groups", {"displayName": "Ops"}), 201)
    scim_err(scim.post("/Groups", {"displayName": "Ops"}), 409, "uniqueness")
    scim_err(scim.post("/Groups", {"schemas": [GROUP]}), 400, "invalidValue")


def test_listing_groups_filters_by_display_name_and_excludes_members(scim, workspace, other_scim):
    scim_ok(scim.post("/Groups", {"displayName": "A"}), 201)
    b = scim_ok(scim.post("/Groups", {"displayName": "B"}), 201)
    scim_ok(other_scim.post("/Groups", {"displayName": "B"}), 201)
    found = scim_ok(scim.get("/Groups", filter='displayName eq "B"', excludedAttributes="members"))
    assert found["totalResults"] == 1 and found["Resources"][0]["id"] == b["id"]
    assert "members" not in found["Resources"][0]
    assert scim_ok(scim.get("/Groups"))["totalResults"] == 2
    assert scim_ok(scim.get("/Groups", startIndex=2, count=1))["Resources"][0]["id"] == b["id"]
    assert scim_ok(scim.get("/Groups", startIndex=10**30))["Resources"] == []  # past a database integer
    scim_err(scim.get("/Groups", filter='displayName co "B"'), 400, "invalidFilter")


def test_patching_members_with_and_without_paths(scim, workspace, users):
    group = scim_ok(scim.post("/Groups", {"displayName": "Eng"}), 201)
    path = f"/Groups/{group['id']}"
    add = [{"op": "Add", "path": "members", "value": [{"value": users[0]}, {"value": users[1]}]}]
    assert members(scim_ok(scim.patch(path, add))) == sorted(users[:2])
    remove = [{"op": "Remove", "path": f'members[value eq "{users[0]}"]'}]
    assert members(scim_ok(scim.patch(path, remove))) == [users[1]]
    assert roles_of(workspace, users[0]) == set()
    replace = [{"op": "replace", "path": "members", "value": [{"value": users[2]}]}]
    assert members(scim_ok(scim.patch(path, replace))) == [users[2]]
    no_path = [{"op": "add", "value": {"members": [{"value": users[0]}], "displayName": "Engineering"}}]
    patched = scim_ok(scim.patch(path, no_path))
    assert patched["displayName"] == "Engineering" and members(patched) == sorted([users[0], users[2]])
    by_value = [{"op": "remove", "path": "members", "value": [{"value": users[2]}]}]
    assert members(scim_ok(scim.patch(path, by_value))) == [users[0]]
    either = f'members[value eq "{users[0]}" or value eq "{users[1]}"]'
    assert members(scim_ok(scim.patch(path, [{"op": "remove", "path": either}]))) == []
    scim_ok(scim.patch(path, add))
    assert members(scim_ok(scim.patch(path, [{"op": "remove", "path": "members"}]))) == []
    events = Event.objects.filter(workspace_id=workspace.pk, payload__type="membership.updated")
    assert events.count() >= 6


def test_renaming_a_group(scim, workspace):
    group = scim_ok(scim.post("/Groups", {"displayName": "Old"}), 201)
    scim_ok(scim.post("/Groups", {"displayName": "Taken"}), 201)
    renamed = scim_ok(
        scim.patch(f"/Groups/{group['id']}", [{"op": "Replace", "path": "displayName", "value": "New"}])
    )
    assert renamed["displayName"] == "New" and Role.objects.get(pk=group["id"]).name == "New"
    taken = [{"op": "replace", "path": "displayName", "value": "Taken"}]
    scim_err(scim.patch(f"/Groups/{group['id']}", taken), 409, "uniqueness")
    scim_err(
        scim.patch(f"/Groups/{group['id']}", [{"op": "remove", "path": "displayName"}]), 400, "mutability"
    )
    scim_err(
        scim.patch(f"/Groups/{group['id']}", [{"op": "add", "path": "owner", "value": "x"}]),
        400,
        "invalidPath",
    )


def test_put_replaces_the_name_and_members(scim, workspace, users):
    group = scim_ok(scim.post("/Groups", {"displayName": "P", "members": [{"value": users[0]}]}), 201)
    put = scim_ok(scim.put(f"/Groups/{group['id']}", {"displayName": "Q", "members": [{"value": users[1]}]}))
    assert put["displayName"] == "Q" and members(put) == [users[1]]


def test_a_group_grants_what_its_role_holds_and_deleting_it_takes_it_away(scim, workspace):
    account = AccountFactory(email="holder@acme.test")
    MembershipFactory(account=account, workspace=workspace, roles=[])
    api = client_for(account, workspace)
    err(api.call("/projects/list", {}), 403, "missing permission projects:list")
    readers = RoleFactory(workspace=workspace, name="readers", permissions=["projects:list"])
    scim_ok(
        scim.patch(
            f"/Groups/{readers.pk}", [{"op": "add", "path": "members", "value": [{"value": str(account.pk)}]}]
        )
    )
    ok(api.call("/projects/list", {}))
    scim_ok(scim.delete(f"/Groups/{readers.pk}"), 204)
    assert not Role.objects.filter(pk=readers.pk).exists()
    err(api.call("/projects/list", {}), 403, "missing permission projects:list")
    scim_err(scim.get(f"/Groups/{readers.pk}"), 404)


def test_another_workspaces_groups_and_people_are_out_of_reach(
    scim, workspace, other_workspace, other_scim, users
):
    theirs = scim_ok(other_scim.post("/Groups", {"displayName": "Theirs"}), 201)
    their_user = scim_ok(other_scim.post("/Users", user_body("them@other.test")), 201)
    outsider = AccountFactory()
    for group_id in (theirs["id"], "not-a-uuid"):
        scim_err(scim.get(f"/Groups/{group_id}"), 404)
        scim_err(
            scim.patch(
                f"/Groups/{group_id}", [{"op": "add", "path": "members", "value": [{"value": users[0]}]}]
            ),
            404,
        )
        scim_err(scim.put(f"/Groups/{group_id}", {"displayName": "x"}), 404)
        scim_err(scim.delete(f"/Groups/{group_id}"), 404)
    assert Role.objects.filter(pk=theirs["id"], name="Theirs").exists()
    mine = scim_ok(scim.post("/Groups", {"displayName": "Mine"}), 201)
    for value in (their_user["id"], str(outsider.pk), "nope"):
        add = [{"op": "add", "path": "members", "value": [{"value": value}]}]
        scim_err(scim.patch(f"/Groups/{mine['id']}", add), 400, "invalidValue")
        scim_err(
            scim.post("/Groups", {"displayName": f"x{value}", "members": [{"value": value}]}),
            400,
            "invalidValue",
        )
    assert not Membership.objects.filter(workspace=workspace, account_id=their_user["id"]).exists()
    assert not Role.objects.filter(workspace=workspace, name__startswith="x").exists()


def test_a_bad_member_value_is_refused(scim):
    group = scim_ok(scim.post("/Groups", {"displayName": "G"}), 201)
    scim_err(
        scim.patch(f"/Groups/{group['id']}", [{"op": "add", "path": "members", "value": ["x"]}]),
        400,
        "invalidValue",
    )
    scim_err(
        scim.patch(f"/Groups/{group['id']}", [{"op": "add", "path": 'members[value eq "x"]', "value": []}]),
        400,
        "invalidPath",
    )
    scim_err(
        scim.patch(f"/Groups/{group['id']}", [{"op": "remove", "path": 'members[display eq "x"]'}]),
        400,
        "invalidFilter",
    )


def test_the_roles_quota_holds(scim, workspace, settings):
    settings.IAM_QUOTA_ROLES = 1
    scim_ok(scim.post("/Groups", {"displayName": "one"}), 201)
    body = scim_err(scim.post("/Groups", {"displayName": "two"}), 403)
    assert body["detail"] == "quota reached: roles (1)"


def test_the_roles_per_membership_quota_holds(scim, workspace, users, settings):
    settings.IAM_QUOTA_ROLES_PER_MEMBERSHIP = 1
    first = scim_ok(scim.post("/Groups", {"displayName": "one", "members": [{"value": users[0]}]}), 201)
    second = scim_ok(scim.post("/Groups", {"displayName": "two"}), 201)
    add = [{"op": "add", "path": "members", "value": [{"value": users[0]}]}]
    body = scim_err(scim.patch(f"/Groups/{second['id']}", add), 403)
    assert body["detail"] == "quota reached: roles per membership (1)"
    assert roles_of(workspace, users[0]) == {"one"} and first


def test_a_group_keeps_its_external_id(scim):
    group = scim_ok(scim.post("/Groups", {"displayName": "X", "externalId": "okta-1"}), 201)
    assert group["externalId"] == "okta-1"
    assert scim_ok(scim.get("/Groups", filter='externalId eq "okta-1"'))["totalResults"] == 1
    patched = scim_ok(
        scim.patch(f"/Groups/{group['id']}", [{"op": "replace", "path": "externalId", "value": "2"}])
    )
    assert patched["externalId"] == "2"


def test_search_by_post_and_attribute_selection(scim, users):
    body = {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
        "filter": 'userName eq "g1@acme.test"',
        "attributes": ["userName"],
    }
    found = scim_ok(scim.post("/Users/.search", body))
    assert found["totalResults"] == 1
    assert found["Resources"] == [
        {"schemas": found["Resources"][0]["schemas"], "id": users[1], "userName": "g1@acme.test"}
    ]
    one = scim_ok(scim.get(f"/Users/{users[1]}", excludedAttributes="emails,name"))
    assert "emails" not in one and "name" not in one and one["userName"] == "g1@acme.test"
    scim_err(scim.post("/.search", {}), 501)
    scim_err(scim.get("/Nothing"), 404)


def test_a_group_answers_at_most_so_many_members(scim, workspace, users, monkeypatch):
    monkeypatch.setattr("scim.resources.MAX_MEMBERS_SHOWN", 2)
    body = {"displayName": "Big", "members": [{"value": pk} for pk in users]}
    group = scim_ok(scim.post("/Groups", body), 201)
    assert len(group["members"]) == 2
    assert len(Role.objects.get(pk=group["id"]).memberships.all()) == 3


# Bounds: operations per PATCH, the byte budget of every answer, members per Group


def add_ops(account_ids, n: int) -> list[dict]:
    """`n` operations that add and remove the same few members in turn, ending with each added."""
    ops = []
    for i in range(n):
        pk = account_ids[i % len(account_ids)]
        op = "remove" if (i // len(account_ids)) % 2 and i < n - len(account_ids) else "add"
        ops.append(
            {"op": op, "path": f'members[value eq "{pk}"]'}
            if op == "remove"
            else {"op": "add", "path": "members", "value": [{"value": pk}]}
        )
    return ops


def test_a_patch_holds_at_most_a_thousand_operations(scim, workspace, users, other_scim):
    group = scim_ok(scim.post("/Groups", {"displayName": "Many"}), 201)
    body = scim_err(scim.patch(f"/Groups/{group['id']}", add_ops(users, 1001)), 400, "tooMany")
    assert body["detail"] == "a PATCH holds at most 1000 operations"
    assert members(scim_ok(scim.get(f"/Groups/{group['id']}"))) == []
    scim_err(
        scim.patch(f"/Users/{users[0]}", [{"op": "replace", "path": "active", "value": False}] * 1001),
        400,
        "tooMany",
    )
    assert roles_of(workspace, users[0]) == set()
    assert members(scim_ok(scim.patch(f"/Groups/{group['id']}", add_ops(users, 1000)))) == sorted(users)
    scim_err(other_scim.patch(f"/Groups/{group['id']}", add_ops(users, 3)), 404)


def test_operations_are_folded_in_order_and_each_membership_changes_once(scim, workspace, users, other_scim):
    group = scim_ok(scim.post("/Groups", {"displayName": "Folded", "members": [{"value": users[2]}]}), 201)
    path = f"/Groups/{group['id']}"
    operations = [
        {"op": "add", "path": "members", "value": [{"value": users[0]}, {"value": users[1]}]},
        {"op": "remove", "path": f'members[value eq "{users[0]}"]'},
        {"op": "replace", "path": "displayName", "value": "Middle"},
        {"op": "add", "path": "members", "value": [{"value": users[0]}]},
        {"op": "remove", "path": "members", "value": [{"value": users[1]}]},
        {"op": "replace", "path": "displayName", "value": "Folded Twice"},
        {"op": "add", "path": "externalId", "value": "e-1"},
    ]
    before = AuditEntry.objects.filter(action="membership.update").count()
    patched = scim_ok(scim.patch(path, operations))
    assert members(patched) == sorted([users[0], users[2]])
    assert patched["displayName"] == "Folded Twice" and patched["externalId"] == "e-1"
    # users[0] gained the role once; users[1] gained and lost it in one request: unchanged, unaudited.
    assert AuditEntry.objects.filter(action="membership.update").count() == before + 1
    assert AuditEntry.objects.filter(action="role.update").count() == 1
    assert roles_of(workspace, users[1]) == set()
    replace_then_add = [
        {"op": "remove", "path": "members"},
        {"op": "add", "path": "members", "value": [{"value": users[1]}]},
        {"op": "replace", "path": "members", "value": [{"value": users[2]}, {"value": users[1]}]},
        {"op": "remove", "path": f'members[value eq "{users[2]}"]'},
    ]
    assert members(scim_ok(scim.patch(path, replace_then_add))) == [users[1]]
    # An id that is no User is refused even when a later operation removes it again.
    theirs = scim_ok(other_scim.post("/Users", user_body("x@other.test")), 201)["id"]
    named_then_removed = [
        {"op": "add", "path": "members", "value": [{"value": theirs}]},
        {"op": "remove", "path": f'members[value eq "{theirs}"]'},
    ]
    scim_err(scim.patch(path, named_then_removed), 400, "invalidValue")
    assert members(scim_ok(scim.get(path))) == [users[1]]


def test_a_thousand_operations_cost_the_queries_of_ten(scim, workspace, users):
    """Each membership changes once however many operations name it: the work grows with the people
    changed, not with the operations."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    scim_ok(scim.get("/Groups"))  # the token's first use of the minute is written once
    counts = []
    for n in (10, 1000):
        group = scim_ok(scim.post("/Groups", {"displayName": f"n{n}"}), 201)
        with CaptureQueriesContext(connection) as queries:
            assert members(scim_ok(scim.patch(f"/Groups/{group['id']}", add_ops(users, n)))) == sorted(users)
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def big_group(workspace, name: str, size: int) -> Role:
    """A role held by `size` Users of the workspace (made directly: what a directory built over time)."""
    role = RoleFactory(workspace=workspace, name=name)
    for n in range(size):
        account = AccountFactory(email=f"{name}-{n}@acme.test")
        MembershipFactory(account=account, workspace=workspace, roles=[role])
    return role


def test_a_page_of_groups_stays_within_the_byte_budget(scim, workspace, settings, other_scim):
    """`GET /Groups?count=50` once answered 4.97 MB whole: a page ends before the Group that would pass the
    budget (holding at least one), `itemsPerPage` says how many it holds, and the next page goes on."""
    roles = [big_group(workspace, f"g{n}", 20) for n in range(3)]
    whole = scim_ok(scim.get("/Groups", count=50))
    sizes = [len(json.dumps(item, separators=(",", ":"))) for item in whole["Resources"]]
    assert whole["itemsPerPage"] == 3 and all(len(item["members"]) == 20 for item in whole["Resources"])
    settings.IAM_PAGE_MAX_BYTES = sizes[0] + sizes[1] + 10  # the first two fit, not the third
    seen, start = [], 1
    while start <= 3:
        response = scim.get("/Groups", count=50, startIndex=start)
        page = scim_ok(response)
        assert page["totalResults"] == 3 and page["itemsPerPage"] == len(page["Resources"]) >= 1
        assert len(response.content) < settings.IAM_PAGE_MAX_BYTES + 200
        seen += [item["id"] for item in page["Resources"]]
        start += page["itemsPerPage"]
    assert seen == [str(role.pk) for role in roles]
    assert scim_ok(scim.get("/Groups", count=50))["itemsPerPage"] == 2
    settings.IAM_PAGE_MAX_BYTES = 10  # one Group alone passes it: the page is that one
    assert scim_ok(scim.get("/Groups", count=50))["itemsPerPage"] == 1
    assert scim_ok(other_scim.get("/Groups"))["totalResults"] == 0


def test_a_page_of_users_stays_within_the_byte_budget(scim, workspace, settings, other_scim):
    for n in range(5):
        scim_ok(scim.post("/Users", user_body(f"p{n}@acme.test")), 201)
    one = len(json.dumps(scim_ok(scim.get("/Users", count=1))["Resources"][0], separators=(",", ":")))
    settings.IAM_PAGE_MAX_BYTES = 2 * one + 50
    page = scim_ok(scim.get("/Users", count=100))
    assert page["totalResults"] == 5 and page["itemsPerPage"] == len(page["Resources"]) == 2
    assert scim_ok(scim.get("/Users", startIndex=5))["itemsPerPage"] == 1
    assert scim_ok(other_scim.get("/Users"))["totalResults"] == 0


def test_a_group_answers_no_more_members_than_its_budget_holds(scim, workspace, settings):
    role = big_group(workspace, "wide", 12)
    assert len(scim_ok(scim.get(f"/Groups/{role.pk}"))["members"]) == 12
    settings.IAM_PAGE_MAX_BYTES = 3000
    for response in (scim.get(f"/Groups/{role.pk}"), scim.get("/Groups")):
        assert len(response.content) <= 3000
    shown = scim_ok(scim.get(f"/Groups/{role.pk}"))["members"]
    assert 0 < len(shown) < 12
    assert role.memberships.count() == 12


def test_a_page_of_groups_reads_members_in_a_few_queries(scim, workspace):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    scim_ok(scim.get("/Groups"))  # the token's first use of the minute is written once
    counts = []
    for n in (2, 12):
        while Role.objects.filter(workspace=workspace).count() < n:
            big_group(workspace, f"q{Role.objects.filter(workspace=workspace).count()}", 2)
        with CaptureQueriesContext(connection) as queries:
            page = scim_ok(scim.get("/Groups", count=100))
        assert page["itemsPerPage"] == n and all(len(item["members"]) == 2 for item in page["Resources"])
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_a_request_names_at_most_ten_thousand_members(scim, workspace, users):
    group = scim_ok(scim.post("/Groups", {"displayName": "Capped"}), 201)
    many = [{"value": users[n % 3]} for n in range(10_001)]
    for response in (
        scim.patch(f"/Groups/{group['id']}", [{"op": "add", "path": "members", "value": many}]),
        scim.patch(
            f"/Groups/{group['id']}",
            [
                {"op": "add", "path": "members", "value": many[:5000]},
                {"op": "remove", "path": "members", "value": many[:5001]},
            ],
        ),
        scim.put(f"/Groups/{group['id']}", {"displayName": "Capped", "members": many}),
        scim.post("/Groups", {"displayName": "Other", "members": many}),
    ):
        assert scim_err(response, 400, "tooMany")["detail"] == "a request names at most 10000 members"
    assert members(scim_ok(scim.get(f"/Groups/{group['id']}"))) == []
    assert not Role.objects.filter(workspace=workspace, name="Other").exists()
    assert members(
        scim_ok(scim.put(f"/Groups/{group['id']}", {"displayName": "C", "members": many[:10_000]}))
    )


def test_a_group_change_pushes_one_event_per_membership_changed(scim, workspace, users, other_workspace):
    from clients.models import Delivery
    from tests.factories import ClientFactory

    ours = ClientFactory(workspace=workspace, endpoint="https://hooks.example.com/ours")
    theirs = ClientFactory(workspace=other_workspace, endpoint="https://hooks.example.com/theirs")
    group = scim_ok(scim.post("/Groups", {"displayName": "Pushed"}), 201)
    Event.objects.all().delete()
    add = [{"op": "add", "path": "members", "value": [{"value": pk} for pk in users]}]
    scim_ok(scim.patch(f"/Groups/{group['id']}", add))
    events = Event.objects.filter(workspace_id=workspace.pk, payload__type="membership.updated")
    assert sorted(event.payload["data"]["account_ids"][0] for event in events) == sorted(users)
    held = {str(m.pk) for m in Membership.objects.filter(workspace=workspace, account_id__in=users)}
    assert {event.payload["data"]["resource"]["id"] for event in events} == held
    assert set(Delivery.objects.filter(client=ours).values_list("event_id", flat=True)) == {
        event.event_id for event in events
    }
    assert not Delivery.objects.filter(client=theirs).exists()
    assert not Event.objects.filter(workspace_id=other_workspace.pk).exists()
    entries = AuditEntry.objects.filter(action="membership.update", workspace_id=workspace.pk)
    assert {str(entry.resource_id) for entry in entries} == held
    assert all(entry.changes["role_ids"]["after"] == [group["id"]] for entry in entries)
    assert all(entry.actor_kind == "scim" for entry in entries)
