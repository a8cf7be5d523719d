"""The audit log in the admin reads like the product: actors by e-mail, workspaces by name and slug,
resources by title (memberships as `alice@example.com in Acme (owner)`), with filters by workspace and
actor and a search by e-mail or workspace name, and no query per row."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from iam.models import AuditEntry
from iam.platform import audit
from rbac.models import Membership
from tests.conftest import client_for, ok
from tests.factories import (
    AccountFactory,
    ClientFactory,
    CredentialFactory,
    MembershipFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

CHANGELIST = reverse("admin:iam_auditentry_changelist")
META = {"schema_version": "1"}


@pytest.fixture
def acme(db):
    return WorkspaceFactory(name="Acme Corp", slug="acme")


@pytest.fixture
def globex(db):
    return WorkspaceFactory(name="Globex", slug="globex")


@pytest.fixture
def alice(acme):
    """An administrator of Acme."""
    account = AccountFactory(email="alice@example.com")
    role = RoleFactory(workspace=acme, name="owner", permissions=["*"])
    MembershipFactory(account=account, workspace=acme, roles=[role])
    return account


@pytest.fixture
def bob(acme):
    account = AccountFactory(email="bob@example.com")
    MembershipFactory(account=account, workspace=acme, roles=[RoleFactory(workspace=acme, name="viewer")])
    return account


@pytest.fixture
def carol(globex):
    """An administrator of Globex, who changes things there."""
    account = AccountFactory(email="carol@example.com")
    role = RoleFactory(workspace=globex, name="owner", permissions=["*"])
    MembershipFactory(account=account, workspace=globex, roles=[role])
    ok(
        client_for(account, globex).call(
            "/projects/create", {"name": "Rockets", "config": META, "tags": [], "meta": META}
        )
    )
    return account


@pytest.fixture
def bobs_roles_changed(acme, alice, bob) -> AuditEntry:
    """Alice gives Bob the `editor` role in Acme over the API."""
    editor = RoleFactory(workspace=acme, name="editor")
    membership = Membership.objects.get(account=bob, workspace=acme)
    ok(
        client_for(alice, acme).call(
            "/memberships/update", {"id": str(membership.pk), "role_ids": [str(editor.pk)]}
        )
    )
    return AuditEntry.objects.get(action="membership.update", resource_id=membership.pk)


def shown(response) -> str:
    assert response.status_code == 200
    return response.content.decode()


def rows(response) -> list[AuditEntry]:
    return list(response.context["cl"].result_list)


def test_a_membership_reads_as_its_account_workspace_and_roles(acme, bob):
    membership = Membership.objects.get(account=bob)
    assert str(membership) == "bob@example.com in Acme Corp (viewer)"
    membership.roles.add(RoleFactory(workspace=acme, name="admin"))
    membership.status = "suspended"
    assert str(membership) == "bob@example.com in Acme Corp (admin, viewer; suspended)"
    project = ProjectFactory(workspace=acme, name="Website")
    scoped = MembershipFactory(account=bob, workspace=acme, project=project, scope="project")
    assert str(scoped) == "bob@example.com in Acme Corp / Website (no roles)"


def test_the_membership_changelist_shows_titles(admin_web, acme, alice, bob):
    html = shown(admin_web.get(reverse("admin:rbac_membership_changelist")))
    assert "bob@example.com in Acme Corp (viewer)" in html
    assert "alice@example.com in Acme Corp (owner)" in html


def test_the_membership_changelist_costs_the_same_for_any_number_of_rows(
    admin_web, acme, alice, django_assert_max_num_queries
):
    url = reverse("admin:rbac_membership_changelist")
    with CaptureQueriesContext(connection) as few:
        assert admin_web.get(url).status_code == 200
    for index in range(30):
        project = ProjectFactory(workspace=acme)
        roles = [RoleFactory(workspace=acme, name=f"r{index}"), RoleFactory(workspace=acme, name=f"s{index}")]
        MembershipFactory(workspace=acme, project=project, scope="project", roles=roles)
    with django_assert_max_num_queries(len(few)) as many:
        html = shown(admin_web.get(url))
    assert len(many) == len(few)
    assert "in Acme Corp / " in html and "(r29, s29)" in html


def test_an_entry_shows_its_actor_workspace_and_resource_by_name(admin_web, bobs_roles_changed):
    html = shown(admin_web.get(CHANGELIST))
    assert "alice@example.com" in html
    assert "Acme Corp (acme)" in html
    assert "bob@example.com in Acme Corp (editor)" in html
    page = shown(admin_web.get(reverse("admin:iam_auditentry_change", args=[bobs_roles_changed.pk])))
    membership = Membership.objects.get(pk=bobs_roles_changed.resource_id)
    for title, url in (
        ("alice@example.com", reverse("admin:accounts_account_change", args=[bobs_roles_changed.actor_id])),
        (
            "Acme Corp (acme)",
            reverse("admin:tenancy_workspace_change", args=[bobs_roles_changed.workspace_id]),
        ),
        (
            "bob@example.com in Acme Corp (editor)",
            reverse("admin:rbac_membership_change", args=[membership.pk]),
        ),
    ):
        assert f'<a href="{url}">{title}</a>' in page
    assert str(bobs_roles_changed.actor_id) in page  # the ids stay shown beside


def test_a_record_deleted_since_shows_its_id(admin_web, bobs_roles_changed):
    Membership.objects.filter(pk=bobs_roles_changed.resource_id).delete()
    html = shown(admin_web.get(reverse("admin:iam_auditentry_change", args=[bobs_roles_changed.pk])))
    assert f"{bobs_roles_changed.resource_id} (gone)" in html


def test_a_resource_type_no_admin_names_shows_its_id(admin_web, db):
    pk = uuid.uuid4()
    audit.record("thing.update", resource=("thing", pk))
    assert str(pk) in shown(admin_web.get(CHANGELIST))


def test_entries_of_a_command_have_no_actor(admin_web, acme):
    audit.record("workspace.update", resource=("workspace", acme.pk), workspace_id=acme.pk)
    html = shown(admin_web.get(CHANGELIST))
    assert "Acme Corp (acme)" in html


def test_filter_by_workspace(admin_web, bobs_roles_changed, carol, acme, globex):
    acme_only = rows(admin_web.get(CHANGELIST, {"workspace": str(acme.pk)}))
    assert bobs_roles_changed in acme_only
    assert {entry.workspace_id for entry in acme_only} == {acme.pk}
    globex_only = rows(admin_web.get(CHANGELIST, {"workspace": str(globex.pk)}))
    assert globex_only and {entry.workspace_id for entry in globex_only} == {globex.pk}
    # the filter lists the workspaces by name
    html = shown(admin_web.get(CHANGELIST))
    assert f"?workspace={acme.pk}" in html and "Globex (globex)" in html


def test_filter_by_actor(admin_web, bobs_roles_changed, alice, carol):
    by_alice = rows(admin_web.get(CHANGELIST, {"actor": str(alice.pk)}))
    assert bobs_roles_changed in by_alice and {entry.actor_id for entry in by_alice} == {alice.pk}
    by_carol = rows(admin_web.get(CHANGELIST, {"actor": str(carol.pk)}))
    assert by_carol and {entry.actor_id for entry in by_carol} == {carol.pk}
    # each actor's cell links to its filter, which then names the actor
    assert f'<a href="?actor={alice.pk}">alice@example.com</a>' in shown(admin_web.get(CHANGELIST))
    filtered = shown(admin_web.get(CHANGELIST, {"actor": str(carol.pk)}))
    assert "carol@example.com" in filtered


def test_the_actor_filter_lists_the_operators(admin_web, operator, bobs_roles_changed):
    choices = [
        choice["display"]
        for spec in admin_web.get(CHANGELIST).context["cl"].filter_specs
        if spec.title == "actor"
        for choice in spec.choices(admin_web.get(CHANGELIST).context["cl"])
    ]
    assert operator.email in choices and "alice@example.com" not in choices


@pytest.mark.parametrize("value", ["not-a-uuid", "2b0c7f9e-0000-4000-8000-000000000000", "", "%00"])
@pytest.mark.parametrize("name", ["actor", "workspace"])
def test_a_filter_value_that_names_nothing_selects_nothing(admin_web, bobs_roles_changed, name, value):
    response = admin_web.get(CHANGELIST, {name: value})
    assert response.status_code == 200
    assert rows(response) == []


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("alice@example.com", {"actor"}),  # the actor's e-mail
        ("ALICE@example", {"actor"}),
        ("bob@example.com", {"target"}),  # the e-mail of the account the entry is about
        ("Acme Corp", {"actor", "target"}),  # a workspace's name
        ("globex", {"carol"}),  # a workspace's slug
        ("carol@", {"carol"}),
        ("nobody@example.com", set()),
    ],
)
def test_search_by_email_and_workspace(admin_web, bobs_roles_changed, carol, term, expected):
    found = set(rows(admin_web.get(CHANGELIST, {"q": term})))
    assert (bobs_roles_changed in found) == bool(expected & {"actor", "target"})
    carols = set(AuditEntry.objects.filter(actor_id=carol.pk))
    assert carols and (carols <= found) == ("carol" in expected)
    if not expected:
        assert found == set()


def test_search_finds_entries_about_an_account_and_its_credentials(admin_web, operator):
    dave = AccountFactory(email="dave@example.com")
    credential = CredentialFactory(account=dave)
    about_account = audit.record("account.update", resource=("account", dave.pk), actor=operator)
    about_credential = audit.record(
        "credential.update", resource=("credential", credential.pk), actor=operator
    )
    unrelated = audit.record("account.update", resource=("account", operator.pk), actor=operator)
    found = rows(admin_web.get(CHANGELIST, {"q": "dave@example"}))
    assert set(found) == {about_account, about_credential} and unrelated not in found
    html = shown(admin_web.get(CHANGELIST, {"q": "dave@example"}))
    assert "password/local of dave@example.com" in html


def test_search_by_id_still_works(admin_web, bobs_roles_changed):
    for value in (bobs_roles_changed.pk, bobs_roles_changed.resource_id, bobs_roles_changed.actor_id):
        assert bobs_roles_changed in rows(admin_web.get(CHANGELIST, {"q": str(value)}))


def entries_of_every_kind(workspace, actor) -> None:
    account = AccountFactory()
    membership = MembershipFactory(
        account=account, workspace=workspace, roles=[RoleFactory(workspace=workspace)]
    )
    records = [
        ("account", account.pk),
        ("workspace", workspace.pk),
        ("project", ProjectFactory(workspace=workspace).pk),
        ("role", RoleFactory(workspace=workspace).pk),
        ("membership", membership.pk),
        ("credential", CredentialFactory(account=account).pk),
        ("client", ClientFactory(workspace=workspace).pk),
    ]
    for resource_type, pk in records:
        audit.record(
            f"{resource_type}.update", resource=(resource_type, pk), workspace_id=workspace.pk, actor=actor
        )


def test_the_changelist_costs_the_same_for_any_number_of_entries(
    admin_web, operator, django_assert_max_num_queries
):
    workspace = WorkspaceFactory()
    entries_of_every_kind(workspace, operator)
    with CaptureQueriesContext(connection) as few:
        assert admin_web.get(CHANGELIST).status_code == 200
    for _ in range(12):  # a full page: 100 entries of other actors, workspaces and records
        entries_of_every_kind(WorkspaceFactory(), AccountFactory())
    assert AuditEntry.objects.count() > 90
    with django_assert_max_num_queries(len(few)) as many:
        html = shown(admin_web.get(CHANGELIST))
    assert len(many) == len(few) <= 22
    assert "(gone)" not in html
