"""The operators' admin: sign-in, and changes that go through the same services as the API (same events,
same cache purges, same validation)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential
from iam.models import AuditEntry, Event, OutboxMessage
from rbac.models import Membership, Permission, Role
from tenancy.models import Project, Workspace
from tests.admin.conftest import form_data
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import (
    PASSWORD,
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    RoleFactory,
    WorkspaceFactory,
)

AUTH = "Authentication required or invalid credentials."
# The API's message too (tests/rbac/test_rbac_api.py).
NAME_FORM = "name must have the form resource:action (each side a name or *), or *"


def events(kind: str) -> list[dict]:
    return [message.payload for message in Event.objects.all() if message.payload["type"] == kind]


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def post_change(admin_web: Client, obj, **changes):
    """GETs the change form and posts it back with `changes` applied."""
    url = change_url(obj)
    data = form_data(admin_web.get(url))
    data.update(changes)
    return admin_web.post(url, data)


def saved(response) -> None:
    errors = response.context["adminform"].form.errors if response.context else None
    assert response.status_code == 302, errors


# sign-in


def test_operator_signs_in_with_email_and_password(operator):
    web = Client()
    response = web.post(
        "/admin/login/?next=/admin/", {"username": "Operator@Example.com", "password": PASSWORD}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"
    page = web.get("/admin/")
    assert page.status_code == 200
    assert b"<title>Operations | IAM admin</title>" in page.content
    assert b">IAM<" in page.content
    assert b"View site" not in page.content


@pytest.mark.parametrize("operator_state", [{"enabled": False}, {"is_superuser": False}])
def test_disabled_accounts_and_non_operators_cannot_sign_in(db, operator_state):
    AccountFactory(email="op@example.com", **{"enabled": True, "is_superuser": True, **operator_state})
    web = Client()
    response = web.post("/admin/login/?next=/admin/", {"username": "op@example.com", "password": PASSWORD})
    assert response.status_code == 200  # the form again, with its error
    assert web.get("/admin/").status_code == 302


def test_revoked_password_credential_cannot_sign_in(operator, root):
    Credential.objects.create(
        account=operator, workspace=root, kind="password", provider="local", status="revoked"
    )
    web = Client()
    web.post("/admin/login/", {"username": operator.email, "password": PASSWORD})
    assert web.get("/admin/").status_code == 302


def test_ending_the_operators_sessions_ends_the_admin_session(admin_web, operator):
    assert admin_web.get("/admin/").status_code == 200
    admin_web.post(
        reverse("admin:accounts_account_changelist"),
        {"action": "end_account_sessions", "_selected_action": [str(operator.pk)]},
    )
    assert admin_web.get("/admin/").status_code == 302


# roles: the ISSUE's first promise


def test_adding_a_permission_to_a_role_takes_effect_at_once(admin_web, root):
    role = RoleFactory(workspace=root, permissions=["accounts:describe"])
    member = AccountFactory()
    MembershipFactory(account=member, workspace=root, roles=[role])
    other = MembershipFactory(workspace=root, roles=[role], status="invited").account
    api = client_for(member)
    err(api.call("/accounts/list", {}), 403, "missing permission accounts:list")  # grants now cached
    listing = Permission.objects.create(workspace=root, name="accounts:list", meta={"schema_version": "1"})

    url = change_url(role)
    data = form_data(admin_web.get(url))
    data["permissions"] = [*data["permissions"], str(listing.pk)]
    saved(admin_web.post(url, data))

    assert set(role.permissions.values_list("name", flat=True)) == {"accounts:describe", "accounts:list"}
    ok(api.call("/accounts/list", {}))
    [event] = events("role.updated")
    assert event["workspace_id"] == str(root.pk)
    assert event["data"] == {
        "account_ids": [str(member.pk)],  # active holders only
        "resource": {"type": "role", "id": str(role.pk)},
    }
    assert str(other.pk) not in event["data"]["account_ids"]


def test_removing_a_permission_from_a_role_takes_effect_at_once(admin_web, root):
    role = RoleFactory(workspace=root, permissions=["accounts:list"])
    member = AccountFactory()
    MembershipFactory(account=member, workspace=root, roles=[role])
    api = client_for(member)
    ok(api.call("/accounts/list", {}))
    saved(post_change(admin_web, role, permissions=[]))
    err(api.call("/accounts/list", {}), 403, "missing permission accounts:list")
    assert len(events("role.updated")) == 1


def test_renaming_a_role_without_touching_permissions_still_records_the_event(admin_web):
    role = RoleFactory(permissions=["projects:*"])
    saved(post_change(admin_web, role, name="renamed"))
    role.refresh_from_db()
    assert role.name == "renamed" and role.updated_at is not None
    assert len(events("role.updated")) == 1


def test_saving_an_unchanged_role_records_nothing(admin_web):
    role = RoleFactory(permissions=["projects:*"])
    saved(post_change(admin_web, role))
    assert events("role.updated") == []


def test_role_permissions_must_come_from_its_workspace(admin_web):
    role = RoleFactory()
    foreign = Permission.objects.create(
        workspace=WorkspaceFactory(), name="x:y", meta={"schema_version": "1"}
    )
    response = post_change(admin_web, role, permissions=[str(foreign.pk)])
    assert response.status_code == 200
    assert role.permissions.count() == 0


def test_the_admin_refuses_what_the_api_refuses(admin_web):
    role = RoleFactory()
    response = post_change(admin_web, role, meta='{"no": "version"}')
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"meta": ["meta.schema_version required"]}


def test_a_name_conflict_is_a_message_not_a_500(admin_web):
    role = RoleFactory()
    RoleFactory(workspace=role.workspace, name="taken")
    response = post_change(admin_web, role, name="taken")
    assert response.status_code == 302
    messages = [str(message) for message in response.wsgi_request._messages]
    assert messages == ["name already exists"]
    role.refresh_from_db()
    assert role.name != "taken"


def test_creating_a_role_in_the_admin(admin_web):
    workspace = WorkspaceFactory()
    permission = Permission.objects.create(
        workspace=workspace, name="projects:list", meta={"schema_version": "1"}
    )
    response = admin_web.post(
        reverse("admin:rbac_role_add"),
        {
            "workspace": str(workspace.pk),
            "name": "reader",
            "permissions": [str(permission.pk)],
            "tags": "[]",
            "meta": '{"schema_version": "1"}',
        },
    )
    saved(response)
    role = Role.objects.get(name="reader")
    assert list(role.permissions.all()) == [permission]


def test_creating_and_updating_a_permission_in_the_admin(admin_web):
    workspace, other = WorkspaceFactory(), WorkspaceFactory()
    Permission.objects.create(workspace=other, name="reports:read", meta={"schema_version": "1"})
    fields = {"workspace": str(workspace.pk), "tags": "[]", "meta": '{"schema_version": "1"}'}
    refused = admin_web.post(reverse("admin:rbac_permission_add"), {**fields, "name": "reports"})
    assert refused.status_code == 200  # the create request's rule, in the API's words
    assert refused.context["adminform"].form.errors == {"name": [NAME_FORM]}
    saved(admin_web.post(reverse("admin:rbac_permission_add"), {**fields, "name": "reports:read"}))
    permission = Permission.objects.get(workspace=workspace)
    assert permission.name == "reports:read"  # the other workspace's of that name is its own
    refused = post_change(admin_web, permission, name="reports")
    assert refused.context["adminform"].form.errors == {"name": [NAME_FORM]}
    saved(post_change(admin_web, permission, name="reports:write", description="Write reports"))
    permission.refresh_from_db()
    assert (permission.name, permission.description) == ("reports:write", "Write reports")
    assert Permission.objects.get(workspace=other).name == "reports:read"


def test_deleting_a_role_in_the_admin(admin_web, root):
    role = RoleFactory(workspace=root, permissions=["accounts:list"])
    member = AccountFactory()
    MembershipFactory(account=member, workspace=root, roles=[role])
    api = client_for(member)
    ok(api.call("/accounts/list", {}))
    response = admin_web.post(reverse("admin:rbac_role_delete", args=[role.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Role.objects.filter(pk=role.pk).exists()
    err(api.call("/accounts/list", {}), 403, "missing permission accounts:list")
    assert events("role.deleted")[0]["data"]["account_ids"] == [str(member.pk)]


def test_bulk_deleting_permissions_goes_through_the_service(admin_web, root):
    role = RoleFactory(workspace=root, permissions=["accounts:list"])
    member = AccountFactory()
    MembershipFactory(account=member, workspace=root, roles=[role])
    api = client_for(member)
    ok(api.call("/accounts/list", {}))
    permission = role.permissions.get()
    admin_web.post(
        reverse("admin:rbac_permission_changelist"),
        {"action": "delete_selected", "_selected_action": [str(permission.pk)], "post": "yes"},
    )
    assert not Permission.objects.filter(pk=permission.pk).exists()
    err(api.call("/accounts/list", {}), 403, "missing permission accounts:list")
    assert len(events("permission.deleted")) == 1


# memberships


def test_suspending_a_membership_in_the_admin(admin_web, root):
    role = RoleFactory(workspace=root, permissions=["accounts:list"])
    member = AccountFactory()
    membership = MembershipFactory(account=member, workspace=root, roles=[role])
    api = client_for(member)
    ok(api.call("/accounts/list", {}))
    saved(post_change(admin_web, membership, status="suspended"))
    err(api.call("/accounts/list", {}), 403, "missing permission accounts:list")
    [event] = events("membership.updated")
    assert event["data"]["account_ids"] == [str(member.pk)]


def test_creating_a_membership_in_the_admin(admin_web, root):
    role = RoleFactory(workspace=root, permissions=["accounts:list"])
    member = AccountFactory()
    api = client_for(member)
    err(api.call("/accounts/list", {}), 403)
    response = admin_web.post(
        reverse("admin:rbac_membership_add"),
        {
            "account": str(member.pk),
            "workspace": str(root.pk),
            "scope": "workspace",
            "status": "active",
            "roles": [str(role.pk)],
            "tags": "[]",
            "meta": '{"schema_version": "1"}',
        },
    )
    saved(response)
    ok(api.call("/accounts/list", {}))
    assert len(events("membership.created")) == 1


def test_a_membership_role_from_another_workspace_is_refused(admin_web):
    workspace = WorkspaceFactory()
    foreign = RoleFactory()
    response = admin_web.post(
        reverse("admin:rbac_membership_add"),
        {
            "account": str(AccountFactory().pk),
            "workspace": str(workspace.pk),
            "scope": "workspace",
            "status": "active",
            "roles": [str(foreign.pk)],
            "tags": "[]",
            "meta": "{}",
        },
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["roles"] == [
        "role_ids must name roles of this workspace"
    ]
    assert not Membership.objects.exists()


# accounts: the ISSUE's second promise


def test_disabling_an_account_in_the_admin_refuses_its_token_at_once(admin_web):
    account = AccountFactory()
    membership = MembershipFactory(account=account)
    api = client_for(account)
    ok(api.call("/accounts/describe", {"id": str(account.pk)}))  # the account is now cached
    response = admin_web.post(
        reverse("admin:accounts_account_changelist"),
        {"action": "disable_accounts", "_selected_action": [str(account.pk)]},
    )
    assert response.status_code == 302
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)
    [event] = events("account.updated")
    assert event["workspace_id"] == str(membership.workspace_id)
    assert event["data"]["account_ids"] == [str(account.pk)]

    admin_web.post(
        reverse("admin:accounts_account_changelist"),
        {"action": "enable_accounts", "_selected_action": [str(account.pk)]},
    )
    # docs/api.md#authorization: the disable ended the sessions; enabling again does not bring the old token
    # back.
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)
    account.refresh_from_db()
    ok(client_for(account).call("/accounts/describe", {"id": str(account.pk)}))
    assert len(events("account.updated")) == 2


def test_disabling_an_account_on_its_change_form(admin_web):
    account = AccountFactory()
    MembershipFactory(account=account)
    api = client_for(account)
    ok(api.call("/accounts/describe", {"id": str(account.pk)}))
    response = post_change(admin_web, account)
    saved(response)
    assert events("account.updated") == []  # nothing changed
    data = form_data(admin_web.get(change_url(account)))
    del data["enabled"]
    saved(admin_web.post(change_url(account), data))
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)
    assert len(events("account.updated")) == 1
    account.refresh_from_db()
    assert account.enabled is False and account.updated_by is not None


def test_granting_operator_status_takes_effect_at_once(admin_web, operator):
    account = AccountFactory()
    membership = MembershipFactory(account=account)
    api = client_for(account)
    err(api.call("/accounts/list", {}), 403)  # the account is now cached
    saved(post_change(admin_web, account, is_superuser="on"))
    ok(api.call("/accounts/list", {}))
    [entry] = AuditEntry.objects.filter(action="account.update", resource_id=account.pk)
    assert entry.changes == {"is_superuser": {"before": False, "after": True}}
    assert entry.actor_id == operator.pk and entry.actor_kind == "operator"
    [event] = events("account.updated")  # docs/integration.md#push-events: what the account may do changed
    assert event["workspace_id"] == str(membership.workspace_id)
    assert event["data"]["account_ids"] == [str(account.pk)]
    account.refresh_from_db()
    assert account.is_superuser and account.updated_by == operator

    data = form_data(admin_web.get(change_url(account)))
    del data["is_superuser"]
    saved(admin_web.post(change_url(account), data))
    err(api.call("/accounts/list", {}), 403)
    assert len(events("account.updated")) == 2
    assert AuditEntry.objects.filter(action="account.update", resource_id=account.pk).count() == 2


def test_revoking_sessions_in_the_admin(admin_web):
    account = AccountFactory()
    api = client_for(account)
    ok(api.call("/accounts/describe", {"id": str(account.pk)}))
    admin_web.post(
        reverse("admin:accounts_account_changelist"),
        {"action": "end_account_sessions", "_selected_action": [str(account.pk)]},
    )
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)


def test_setting_a_password_in_the_admin_ends_sessions(admin_web, root):
    account = AccountFactory()
    CredentialFactory(account=account, workspace=root)
    api = client_for(account)
    url = reverse("admin:accounts_account_password", args=[account.pk])
    page = admin_web.get(url)
    assert page.status_code == 200 and b"Set password" in page.content

    response = admin_web.post(url, {"password1": "short", "password2": "short"})
    assert response.status_code == 200
    assert response.context["form"].errors == {"password1": ["password must have at least 8 characters"]}
    response = admin_web.post(url, {"password1": "a-new-passphrase", "password2": "another-one-12"})
    assert response.context["form"].errors == {"password2": ["passwords do not match"]}

    response = admin_web.post(url, {"password1": "a-new-passphrase", "password2": "a-new-passphrase"})
    assert response.status_code == 302 and response["Location"] == change_url(account)
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401, AUTH)
    login = ApiClient().call("/auth/login", {"email": account.email, "password": "a-new-passphrase"})
    assert login.status_code == 200
    # docs/api.md#invitations: the root workspace holds its credentials, so its clients are told; no other is.
    assert [event["workspace_id"] for event in events("session.revoked")] == [str(root.pk)]


def test_an_operator_setting_their_own_password_stays_signed_in(admin_web, operator):
    url = reverse("admin:accounts_account_password", args=[operator.pk])
    admin_web.post(url, {"password1": "a-new-passphrase", "password2": "a-new-passphrase"})
    assert admin_web.get("/admin/").status_code == 200


def test_the_change_form_shows_no_password_hash(admin_web):
    account = AccountFactory()
    page = admin_web.get(change_url(account))
    assert page.status_code == 200
    assert b"$argon2" not in page.content
    assert b"set (<a href=" in page.content
    assert "password" not in page.context["adminform"].form.fields


def test_creating_an_account_in_the_admin(admin_web, root):
    response = admin_web.post(
        reverse("admin:accounts_account_add"),
        {
            "email": "New@Example.com",
            "name": "New",
            "password1": "a-long-passphrase",
            "password2": "a-long-passphrase",
            "verified": "on",
        },
    )
    saved(response)
    account = Account.objects.get(email="new@example.com")
    assert account.verified and account.created_by is not None and not account.is_superuser
    credential = Credential.objects.get(account=account)
    assert (credential.kind, credential.workspace) == ("password", root)
    assert ok(ApiClient().call("/auth/login", {"email": "new@example.com", "password": "a-long-passphrase"}))


def test_creating_an_account_with_a_taken_email_or_weak_password(admin_web):
    AccountFactory(email="taken@example.com")
    response = admin_web.post(
        reverse("admin:accounts_account_add"),
        {"email": "TAKEN@example.com", "name": "X", "password1": "password", "password2": "password"},
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["password1"] == ["password is too common"]
    assert "email" in errors


def test_deleting_an_account_in_the_admin(admin_web):
    account = AccountFactory()
    MembershipFactory(account=account)
    admin_web.post(reverse("admin:accounts_account_delete", args=[account.pk]), {"post": "yes"})
    assert not Account.objects.filter(pk=account.pk).exists()
    assert len(events("account.deleted")) == 1


def test_revoking_a_credential_in_the_admin(admin_web, root):
    account = AccountFactory()
    credential = Credential.objects.create(
        account=account, workspace=root, kind="password", provider="local", status="active"
    )
    saved(post_change(admin_web, credential, status="revoked"))
    credential.refresh_from_db()
    assert credential.status == "revoked"
    err(ApiClient().call("/auth/login", {"email": account.email, "password": PASSWORD}), 401)


# workspaces and projects


def test_creating_a_workspace_in_the_admin_makes_the_operator_its_owner(admin_web, operator):
    page = admin_web.get(reverse("admin:tenancy_workspace_add"))
    assert page.context["adminform"].form["config"].value() == '{"schema_version": "1"}'
    response = admin_web.post(
        reverse("admin:tenancy_workspace_add"),
        {
            "name": "Acme",
            "slug": "acme",
            "config": '{"schema_version": "1"}',
            "tags": "[]",
            "meta": '{"schema_version": "1"}',
        },
    )
    saved(response)
    workspace = Workspace.objects.get(slug="acme")
    membership = Membership.objects.get(workspace=workspace, account=operator)
    assert [role.name for role in membership.roles.all()] == ["owner"]


def test_an_invalid_slug_is_refused_with_the_apis_message(admin_web):
    response = admin_web.post(
        reverse("admin:tenancy_workspace_add"),
        {"name": "Acme", "slug": "Not A Slug", "config": "{}", "tags": "[]", "meta": "{}"},
    )
    assert response.status_code == 200
    assert not Workspace.objects.filter(name="Acme").exists()


def test_updating_a_workspace_in_the_admin(admin_web):
    workspace = WorkspaceFactory()
    saved(post_change(admin_web, workspace, name="Renamed", slug="ignored"))
    workspace.refresh_from_db()
    assert workspace.name == "Renamed" and workspace.slug != "ignored"
    assert len(events("workspace.updated")) == 1


def test_the_root_workspace_cannot_be_deleted_in_the_admin(admin_web, root):
    response = admin_web.post(reverse("admin:tenancy_workspace_delete", args=[root.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert [str(m) for m in response.wsgi_request._messages] == ["the root workspace cannot be deleted"]
    assert Workspace.objects.filter(pk=root.pk).exists()


def test_deleting_a_project_in_the_admin_ends_its_grants(admin_web):
    workspace = WorkspaceFactory()
    project = Project.objects.create(workspace=workspace, name="P", meta={"schema_version": "1"})
    member = AccountFactory()
    MembershipFactory(account=member, workspace=workspace, scope="project", project=project)
    admin_web.post(reverse("admin:tenancy_project_delete", args=[project.pk]), {"post": "yes"})
    assert not Project.objects.filter(pk=project.pk).exists()
    assert events("project.deleted")[0]["data"]["account_ids"] == [str(member.pk)]


def test_creating_and_updating_a_project_in_the_admin(admin_web):
    workspace = WorkspaceFactory()
    response = admin_web.post(
        reverse("admin:tenancy_project_add"),
        {
            "workspace": str(workspace.pk),
            "name": "Site",
            "code": "site",
            "config": '{"schema_version": "1"}',
            "tags": '["a"]',
            "meta": '{"schema_version": "1"}',
        },
    )
    saved(response)
    project = Project.objects.get(name="Site")
    assert project.code == "site" and project.tags == ["a"] and project.created_by is not None
    saved(post_change(admin_web, project, code=""))
    project.refresh_from_db()
    assert project.code is None


# outbox


def test_retrying_failed_outbox_messages(admin_web, monkeypatch, django_capture_on_commit_callbacks):
    published = []
    monkeypatch.setattr(
        "iam.platform.outbox.publish", lambda message_id, **kwargs: published.append(message_id)
    )
    now = timezone.now()
    failed = OutboxMessage.objects.create(
        topic="push.event", status="failed", deadline=now - timedelta(hours=1), attempts=9
    )
    done = OutboxMessage.objects.create(topic="push.event", status="done", deadline=now)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_web.post(
            reverse("admin:iam_outboxmessage_changelist"),
            {"action": "retry_messages", "_selected_action": [str(failed.pk), str(done.pk)]},
        )
    assert response.status_code == 302
    failed.refresh_from_db()
    done.refresh_from_db()
    assert failed.status == "pending" and failed.deadline > now
    assert done.status == "done"
    assert published == [failed.pk]


def test_outbox_messages_are_read_only(admin_web):
    message = OutboxMessage.objects.create(topic="push.event", deadline=timezone.now())
    page = admin_web.get(change_url(message))
    assert page.status_code == 200
    assert admin_web.get(reverse("admin:iam_outboxmessage_add")).status_code == 403


def test_an_operator_changing_their_own_password_ends_their_other_sessions(admin_web, operator):
    api = client_for(operator)
    ok(api.call("/accounts/describe", {"id": str(operator.pk)}))
    url = reverse("admin:password_change")
    response = admin_web.post(
        url, {"old_password": PASSWORD, "new_password1": "password", "new_password2": "password"}
    )
    assert response.status_code == 200
    assert response.context["form"].errors == {"new_password2": ["This password is too common."]}
    response = admin_web.post(
        url,
        {"old_password": PASSWORD, "new_password1": "a-new-passphrase", "new_password2": "a-new-passphrase"},
    )
    assert response.status_code == 302
    err(api.call("/accounts/describe", {"id": str(operator.pk)}), 401, AUTH)
    assert admin_web.get("/admin/").status_code == 200  # this session goes on
    operator.refresh_from_db()
    assert operator.check_password("a-new-passphrase")


def test_groups_are_not_in_the_admin(admin_web):
    assert b"Groups" not in admin_web.get("/admin/").content


def test_a_membership_project_from_another_workspace_is_refused(admin_web):
    workspace = WorkspaceFactory()
    foreign = Project.objects.create(workspace=WorkspaceFactory(), name="P", meta={"schema_version": "1"})
    response = admin_web.post(
        reverse("admin:rbac_membership_add"),
        {
            "account": str(AccountFactory().pk),
            "workspace": str(workspace.pk),
            "project": str(foreign.pk),
            "scope": "project",
            "status": "active",
            "tags": "[]",
            "meta": '{"schema_version": "1"}',
        },
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["project"] == [
        "project_id must name a project of this workspace"
    ]


@pytest.mark.parametrize("model", ["workspace", "project", "role"])
def test_a_change_that_fails_its_own_field_check_is_a_form_error_not_a_500(admin_web, model):
    """The base form sends the API's serializer only the fields that passed their own checks."""
    workspace = WorkspaceFactory()
    record = {
        "workspace": lambda: workspace,
        "project": lambda: Project.objects.create(
            workspace=workspace, name="P", meta={"schema_version": "1"}
        ),
        "role": lambda: RoleFactory(workspace=workspace),
    }[model]()
    response = post_change(admin_web, record, meta="{not json")
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["meta"] == ["Enter a valid JSON."]
