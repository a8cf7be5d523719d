"""SCIM Users: an account with its membership in the workspace. Creating, linking (only within the
workspace's verified domains), filtering, paging, PATCH as Entra ID sends it, PUT as Okta sends it,
suspension (grants end at once) and deprovisioning (the membership goes, the account stays)."""

import pytest

from accounts.models import Account
from clients.models import Client
from iam.models import AuditEntry, Event
from rbac.models import Membership
from scim.models import ScimRequest, ScimToken
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import AccountFactory, ClientFactory, MembershipFactory, RoleFactory

from .conftest import ENTERPRISE, USER, scim_err, scim_ok, user_body, verify_domain


def create_user(scim, email, **extra) -> dict:
    return scim_ok(scim.post("/Users", user_body(email, **extra)), 201)


def membership_of(workspace, account_id) -> Membership:
    return Membership.objects.get(workspace=workspace, account_id=account_id, scope="workspace")


def test_creating_a_user_creates_a_verified_account_and_an_active_membership(scim, workspace):
    response = scim.post("/Users", user_body("ada@acme.test", externalId="00u1"))
    user = scim_ok(response, 201)
    assert user["schemas"][0] == USER
    assert user["userName"] == "ada@acme.test" and user["active"] is True and user["externalId"] == "00u1"
    assert user["meta"]["resourceType"] == "User"
    assert response["Location"] == user["meta"]["location"] and user["meta"]["location"].endswith(user["id"])
    account = Account.objects.get(pk=user["id"])
    assert account.verified and account.name == "Ada Lovelace" and not account.has_usable_password()
    membership = membership_of(workspace, account.pk)
    assert membership.status == "active" and membership.accepted_at is not None
    assert scim_ok(scim.get(f"/Users/{user['id']}")) == user
    token = ScimToken.objects.get(workspace=workspace)
    entry = AuditEntry.objects.get(action="membership.create", resource_id=membership.pk)
    assert entry.actor_kind == "scim" and entry.actor_id == token.pk and entry.workspace_id == workspace.pk
    event = Event.objects.get(workspace_id=workspace.pk, payload__type="membership.created")
    assert event.payload["data"]["account_ids"] == [str(account.pk)]


def test_a_user_created_inactive_starts_suspended(scim, workspace):
    user = create_user(scim, "off@acme.test", active=False)
    assert user["active"] is False
    assert membership_of(workspace, user["id"]).status == "suspended"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"schemas": [USER]}, "userName required"),
        ({"userName": 5}, "userName must be a string"),
        ({"userName": "not-an-address"}, "userName must be an e-mail address"),
        ({"userName": '"ceo@bigcorp.test"@acme.test'}, "userName must be an e-mail address"),
        ({"userName": "a@b@acme.test"}, "userName must be an e-mail address"),
        ({"userName": "a@acme.test", "active": "perhaps"}, "active must be a boolean"),
    ],
)
def test_a_bad_user_is_refused(scim, body, detail):
    assert scim_err(scim.post("/Users", body), 400, "invalidValue")["detail"] == detail


def test_a_malformed_body_is_invalid_syntax(scim):
    scim_err(scim("POST", "/Users", raw="{nope"), 400, "invalidSyntax")
    scim_err(scim("POST", "/Users", raw="[1]"), 400, "invalidSyntax")


def test_an_existing_account_in_a_verified_domain_is_linked(scim, workspace):
    verify_domain(workspace, "acme.test")
    account = AccountFactory(email="carol@acme.test", verified=True)
    user = create_user(scim, "carol@acme.test")
    assert user["id"] == str(account.pk)
    assert membership_of(workspace, account.pk).status == "active"


def test_a_domain_verified_by_another_workspace_links_nothing_here(scim, other_scim, other_workspace):
    account = AccountFactory(email="carol@other.test", verified=True)
    body = scim_err(scim.post("/Users", user_body("carol@other.test")), 400, "invalidValue")
    assert body["detail"] == "userName must be in a verified domain of this workspace"
    assert not Membership.objects.filter(account=account).exists()
    assert create_user(other_scim, "carol@other.test")["id"] == str(account.pk)
    assert membership_of(other_workspace, account.pk).status == "active"


def test_linking_an_unverified_account_reclaims_it(scim, workspace):
    """Someone may have registered the address without the mailbox: the directory's word verifies it,
    and whatever that someone held ends (its password, its sessions)."""
    verify_domain(workspace, "acme.test")
    squatter = AccountFactory(email="dan@acme.test", verified=False)
    token = client_for(squatter).token
    create_user(scim, "dan@acme.test")
    squatter.refresh_from_db()
    assert squatter.verified and not squatter.has_usable_password()
    err(ApiClient(token).call("/sessions/list", {}), 401)


def test_a_member_already_is_a_conflict(scim, workspace):
    create_user(scim, "eve@acme.test")
    scim_err(scim.post("/Users", user_body("eve@acme.test")), 409, "uniqueness")


def test_listing_filters_and_pages(scim, workspace, other_scim):
    first = create_user(scim, "u1@acme.test", externalId="ext-1")
    second = create_user(scim, "u2@acme.test", externalId="ext-2")
    third = create_user(scim, "u3@acme.test")
    create_user(other_scim, "u4@other.test", externalId="ext-1")

    def ids(**query):
        body = scim_ok(scim.get("/Users", **query))
        assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:ListResponse"]
        assert body["itemsPerPage"] == len(body["Resources"])
        return body["totalResults"], [user["id"] for user in body["Resources"]]

    assert ids() == (3, [first["id"], second["id"], third["id"]])
    assert ids(filter='userName eq "U2@acme.test"') == (1, [second["id"]])
    assert ids(filter='username Eq "u2@acme.test"') == (1, [second["id"]])
    assert ids(filter='externalId eq "ext-1"') == (1, [first["id"]])
    assert ids(filter='emails.value eq "u3@acme.test"') == (1, [third["id"]])
    assert ids(filter=f'{USER}:userName eq "u3@acme.test"') == (1, [third["id"]])
    both = 'userName eq "u1@acme.test" or externalId eq "ext-2"'
    assert ids(filter=both) == (2, [first["id"], second["id"]])
    assert ids(filter='userName eq "u1@acme.test" and externalId eq "ext-2"') == (0, [])
    assert ids(filter='userName eq "u4@other.test"') == (0, [])
    assert ids(startIndex=2, count=1) == (3, [second["id"]])
    assert ids(startIndex=0, count=0) == (3, [])
    assert ids(startIndex=10**30) == (3, [])  # past every record, and past a database integer: no 500
    assert scim_ok(scim.get("/Users", startIndex=3))["startIndex"] == 3


@pytest.mark.parametrize(
    "text",
    [
        'userName sw "u"',
        'title eq "x"',
        "userName pr",
        'not (userName eq "x")',
        "userName eq 5",
        "userName eq",
    ],
)
def test_other_filters_are_refused(scim, text):
    scim_err(scim.get("/Users", filter=text), 400, "invalidFilter")


def test_paging_parameters_must_be_integers(scim):
    scim_err(scim.get("/Users", count="many"), 400, "invalidValue")


def test_users_of_another_workspace_are_not_found(scim, other_scim, other_workspace):
    theirs = create_user(other_scim, "them@other.test")
    outsider = AccountFactory()
    for user_id in (theirs["id"], str(outsider.pk), "not-a-uuid"):
        scim_err(scim.get(f"/Users/{user_id}"), 404)
        scim_err(scim.patch(f"/Users/{user_id}", [{"op": "replace", "path": "active", "value": False}]), 404)
        scim_err(scim.put(f"/Users/{user_id}", user_body("them@other.test")), 404)
        scim_err(scim.delete(f"/Users/{user_id}"), 404)
    assert membership_of(other_workspace, theirs["id"]).status == "active"


def member_with_grants(workspace):
    """An account provisioned by hand with a role, and its API client in the workspace (its grants are
    read, so cached, before the directory acts)."""
    account = AccountFactory(email="grace@acme.test")
    role = RoleFactory(workspace=workspace, permissions=["projects:list"])
    MembershipFactory(account=account, workspace=workspace, roles=[role])
    api = client_for(account, workspace)
    ok(api.call("/projects/list", {}))
    return account, api


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "Replace", "path": "active", "value": "False"}],  # Entra ID
        [{"op": "replace", "value": {"active": False}}],  # no path
        [{"op": "REPLACE", "path": "urn:ietf:params:scim:schemas:core:2.0:User:active", "value": "false"}],
    ],
)
def test_deactivating_ends_the_grants_at_once(scim, workspace, operations):
    account, api = member_with_grants(workspace)
    user = scim_ok(scim.patch(f"/Users/{account.pk}", operations))
    assert user["active"] is False
    assert membership_of(workspace, account.pk).status == "suspended"
    err(api.call("/projects/list", {}), 403, "not a member of this workspace")
    event = Event.objects.filter(workspace_id=workspace.pk, payload__type="membership.updated").get()
    assert event.payload["data"]["account_ids"] == [str(account.pk)]
    entry = AuditEntry.objects.get(action="membership.update")
    assert entry.actor_kind == "scim" and entry.changes["status"] == {
        "before": "active",
        "after": "suspended",
    }
    user = scim_ok(scim.patch(f"/Users/{account.pk}", [{"op": "Replace", "path": "active", "value": "True"}]))
    assert user["active"] is True
    ok(api.call("/projects/list", {}))


def test_deactivating_suspends_project_memberships_too(scim, workspace):
    from tests.factories import ProjectFactory

    account, _ = member_with_grants(workspace)
    project = ProjectFactory(workspace=workspace)
    in_project = MembershipFactory(account=account, workspace=workspace, scope="project", project=project)
    scim_ok(scim.patch(f"/Users/{account.pk}", [{"op": "replace", "path": "active", "value": False}]))
    in_project.refresh_from_db()
    assert in_project.status == "suspended"


def test_clients_validate_refuses_a_deactivated_then_a_deprovisioned_member_at_once(scim, workspace):
    account, api = member_with_grants(workspace)
    client = ClientFactory(workspace=workspace)

    def validate():
        body = {"client_id": str(client.pk), "client_secret": client.secret, "token": api.token}
        return ok(ApiClient().call("/clients/validate", {**body, "permission": "projects:list"}))

    assert validate()["authorized"] is True
    scim_ok(scim.patch(f"/Users/{account.pk}", [{"op": "Replace", "path": "active", "value": "False"}]))
    assert validate()["authorized"] is False
    scim_ok(scim.patch(f"/Users/{account.pk}", [{"op": "Replace", "path": "active", "value": "True"}]))
    assert validate()["authorized"] is True
    scim_ok(scim.delete(f"/Users/{account.pk}"), 204)
    assert validate()["authorized"] is False
    assert Client.objects.filter(pk=client.pk).exists()


def test_entra_id_patch_forms(scim, workspace):
    user = create_user(scim, "hal@acme.test", externalId="old")
    operations = [
        {"op": "Add", "path": "externalId", "value": "new"},
        {"op": "Replace", "path": "name.givenName", "value": "Hal"},
        {"op": "Add", "path": "title", "value": "Engineer"},
        {"op": "Add", "path": f"{ENTERPRISE}:department", "value": "R&D"},
        {"op": "Replace", "path": 'emails[type eq "work"].value', "value": "hal@acme.test"},
        {"op": "Replace", "value": {"displayName": "Hal Nine", f"{ENTERPRISE}:manager": {"value": "x"}}},
    ]
    patched = scim_ok(scim.patch(f"/Users/{user['id']}", operations))
    assert patched["externalId"] == "new" and patched["displayName"] == "Hal Nine"
    assert scim_ok(scim.get("/Users", filter='externalId eq "new"'))["totalResults"] == 1
    removed = scim_ok(scim.patch(f"/Users/{user['id']}", [{"op": "Remove", "path": "externalId"}]))
    assert "externalId" not in removed


@pytest.mark.parametrize(
    ("operations", "scim_type"),
    [
        ([], "invalidSyntax"),
        ([{"op": "move", "path": "active", "value": True}], "invalidSyntax"),
        ([{"op": "replace", "path": "bad[[", "value": True}], "invalidPath"),
        ([{"op": "replace", "value": "not an object"}], "invalidValue"),
        ([{"op": "remove"}], "noTarget"),
        ([{"op": "replace", "path": "userName", "value": "other@acme.test"}], "mutability"),
        (["not an object"], "invalidSyntax"),
    ],
)
def test_bad_patches_are_refused_and_change_nothing(scim, workspace, operations, scim_type):
    user = create_user(scim, "ida@acme.test")
    operations = [*operations, {"op": "replace", "path": "active", "value": False}] if operations else []
    body = {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": operations}
    scim_err(scim("PATCH", f"/Users/{user['id']}", body), 400, scim_type)
    assert membership_of(workspace, user["id"]).status == "active"


def test_okta_puts_the_whole_user(scim, workspace):
    user = create_user(scim, "joe@acme.test", externalId="00u9")
    body = user_body("joe@acme.test", externalId="00u9", active=False, displayName="Joe Q")
    put = scim_ok(scim.put(f"/Users/{user['id']}", body))
    assert put["active"] is False and put["displayName"] == "Joe Q"
    assert membership_of(workspace, user["id"]).status == "suspended"
    scim_err(scim.put(f"/Users/{user['id']}", user_body("other@acme.test")), 400, "mutability")


def test_a_linked_account_keeps_its_own_name(scim, workspace):
    verify_domain(workspace, "acme.test")
    account = AccountFactory(email="kim@acme.test", verified=True, name="Kim")
    create_user(scim, "kim@acme.test")
    scim_ok(
        scim.patch(f"/Users/{account.pk}", [{"op": "replace", "path": "displayName", "value": "Mallory"}])
    )
    account.refresh_from_db()
    assert account.name == "Kim"


def test_deleting_a_user_removes_the_membership_never_the_account(scim, workspace):
    user = create_user(scim, "liz@acme.test")
    scim_ok(scim.delete(f"/Users/{user['id']}"), 204)
    assert Account.objects.filter(pk=user["id"]).exists()
    assert not Membership.objects.filter(workspace=workspace, account_id=user["id"]).exists()
    scim_err(scim.get(f"/Users/{user['id']}"), 404)
    assert Event.objects.filter(workspace_id=workspace.pk, payload__type="membership.deleted").exists()
    assert AuditEntry.objects.filter(action="membership.delete", actor_kind="scim").exists()
    # Provisioned again: linked, since the account now exists; it is still the one this directory created
    # (so it may rename it).
    assert create_user(scim, "liz@acme.test")["id"] == user["id"]
    renamed = [{"op": "replace", "path": "displayName", "value": "Liz Two"}]
    assert scim_ok(scim.patch(f"/Users/{user['id']}", renamed))["displayName"] == "Liz Two"


def test_every_authenticated_request_is_logged_with_its_outcome(scim, workspace, other_scim, other_workspace):
    create_user(scim, "log@acme.test")
    scim.get("/Users", filter='title eq "x"')
    rows = list(ScimRequest.objects.filter(workspace=workspace).order_by("occurred_at", "pk"))
    assert [(row.method, row.status, row.scim_type) for row in rows] == [
        ("POST", 201, ""),
        ("GET", 400, "invalidFilter"),
    ]
    assert all(row.token == ScimToken.objects.get(workspace=workspace) for row in rows)
    assert rows[1].path.startswith(f"/scim/v2/{workspace.pk}/Users?filter=")
    assert "scim_" not in "".join(row.path + row.detail for row in rows)
    assert not ScimRequest.objects.filter(workspace=other_workspace).exists()


def test_requests_without_the_workspace_s_token_write_nothing_to_its_log(scim, workspace, other_scim):
    """Anyone can send them: a caller-chosen path of up to 1 KiB per request would fill the log its
    operators read."""
    long_path = "/Users/" + "x" * 1000
    for token in (None, "scim_wrong", other_scim.token):
        scim_err(scim.get("/Users", token=token), 401)
        scim_err(scim.get(long_path, token=token), 401)
        scim_err(scim.post("/Users", user_body("nobody@acme.test"), token=token), 401)
        scim_err(scim.patch(long_path, [{"op": "remove", "path": "members"}], token=token), 401)
    assert not ScimRequest.objects.exists()
    scim_ok(scim.get("/Users"))
    assert ScimRequest.objects.filter(workspace=workspace, status=200).count() == 1


def test_discovery(scim, workspace):
    config = scim_ok(scim.get("/ServiceProviderConfig"))
    assert config["patch"]["supported"] is True and config["filter"] == {
        "supported": True,
        "maxResults": 1000,
    }
    assert config["bulk"]["supported"] is False
    types = scim_ok(scim.get("/ResourceTypes"))
    assert {item["id"] for item in types["Resources"]} == {"User", "Group"}
    assert scim_ok(scim.get("/ResourceTypes/User"))["endpoint"] == "/Users"
    schemas = scim_ok(scim.get("/Schemas"))
    assert {item["id"] for item in schemas["Resources"]} == {
        USER,
        "urn:ietf:params:scim:schemas:core:2.0:Group",
    }
    user_schema = {item["name"]: item for item in scim_ok(scim.get(f"/Schemas/{USER}"))["attributes"]}
    assert set(user_schema) == {"userName", "name", "displayName", "active", "emails"}
    assert user_schema["userName"]["mutability"] == "immutable"
    assert scim_ok(scim.get(f"/Schemas/{USER}"))["id"] == USER
    scim_err(scim.get("/Schemas/urn:nope"), 404)
    scim_err(scim("POST", "/ServiceProviderConfig", {}), 405)
    scim_err(scim("DELETE", "/Users"), 405)


def test_a_trailing_slash_in_the_base_url_is_accepted(scim):
    scim.base += "/"
    scim_ok(scim.get("/Users"))


@pytest.mark.parametrize(
    "raw",
    [
        '{"userName": "nul\\u0000@acme.test"}',
        '{"userName": "a@acme.test", "displayName": "\\ud800"}',
        '{"userName": "a@acme.test", "name": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"userName": "a@acme.test", "count": 1e999999}',
    ],
)
def test_what_no_column_can_hold_is_refused_not_a_500(scim, raw):
    scim_err(scim("POST", "/Users", raw=raw), 400, "invalidSyntax")


def test_a_nul_in_the_query_is_refused(scim):
    scim_err(scim.get("/Users", filter='userName eq "a\x00"'), 400, "invalidValue")
    scim_err(scim.get("/Groups", excludedAttributes="\x00"), 400, "invalidValue")


def test_a_member_of_one_project_only_is_linked_within_the_verified_domains(scim, workspace):
    from tests.factories import ProjectFactory

    verify_domain(workspace, "acme.test")
    account = AccountFactory(email="pat@acme.test", verified=True)
    MembershipFactory(
        account=account, workspace=workspace, scope="project", project=ProjectFactory(workspace=workspace)
    )
    assert scim_ok(scim.get("/Users", filter='userName eq "pat@acme.test"'))["totalResults"] == 0
    assert create_user(scim, "pat@acme.test")["id"] == str(account.pk)
    outsider = AccountFactory(email="quin@elsewhere.test", verified=True)
    MembershipFactory(
        account=outsider, workspace=workspace, scope="project", project=ProjectFactory(workspace=workspace)
    )
    scim_err(scim.post("/Users", user_body("quin@elsewhere.test")), 400, "invalidValue")
    assert not Membership.objects.filter(account=outsider, scope="workspace").exists()


def test_attributes_not_kept_are_accepted_dropped_and_not_published(scim, workspace, other_scim):
    extra = {
        "title": "Engineer",
        "phoneNumbers": [{"value": "+1 555 0100", "type": "work"}],
        "nickName": "Ace",
        "schemas": [USER, ENTERPRISE],
        ENTERPRISE: {"department": "R&D", "manager": {"value": "x"}},
    }
    user = create_user(scim, "drop@acme.test", **extra)
    for answer in (user, scim_ok(scim.get(f"/Users/{user['id']}"))):
        assert not {"title", "phoneNumbers", "nickName", ENTERPRISE} & set(answer)
    put = scim_ok(scim.put(f"/Users/{user['id']}", user_body("drop@acme.test", **extra)))
    assert "title" not in put
    user_schema = scim_ok(scim.get(f"/Schemas/{USER}"))["attributes"]
    group_schema = scim_ok(scim.get("/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group"))["attributes"]
    assert {item["name"] for item in user_schema} == {"userName", "name", "displayName", "active", "emails"}
    assert {item["name"] for item in group_schema} == {"displayName", "members"}
    assert [
        sub["name"] for item in user_schema if item["name"] == "name" for sub in item["subAttributes"]
    ] == ["formatted"]
    assert scim_ok(other_scim.get("/Schemas"))["totalResults"] == 2
    scim_err(other_scim.get(f"/Users/{user['id']}"), 404)


def test_user_name_never_changes_in_either_workspace(scim, workspace, other_scim, other_workspace):
    user = create_user(scim, "fixed@acme.test")
    theirs = create_user(other_scim, "fixed@other.test")
    for directory, pk, other in (
        (scim, user["id"], "moved@acme.test"),
        (other_scim, theirs["id"], "m@other.test"),
    ):
        patch = [{"op": "replace", "path": "userName", "value": other}]
        assert scim_err(directory.patch(f"/Users/{pk}", patch), 400, "mutability")["detail"] == (
            "userName cannot change"
        )
        scim_err(directory.put(f"/Users/{pk}", user_body(other)), 400, "mutability")
        scim_err(
            directory.patch(f"/Users/{pk}", [{"op": "replace", "value": {"userName": other}}]),
            400,
            "mutability",
        )
    scim_err(
        scim.patch(f"/Users/{theirs['id']}", [{"op": "replace", "path": "userName", "value": "x@acme.test"}]),
        404,
    )
    assert Account.objects.get(pk=user["id"]).email == "fixed@acme.test"
    assert Account.objects.get(pk=theirs["id"]).email == "fixed@other.test"
