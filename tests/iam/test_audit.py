"""The audit log: one entry per change, in the change's transaction, with the right actor for
each source of change (API, admin, command, worker; OAuth in tests/authn/test_oauth_audit.py), no secret
in `changes`, `POST /audit/list` scoped to the workspace, append-only, dropped by `cleanup`."""

import io
import json
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from authn.models import Credential
from clients.models import Client as ServiceClient
from iam.models import AuditEntry, Event, OutboxMessage
from iam.platform import audit, context, outbox
from iam.tasks import process_outbox_message
from tests.conftest import ApiClient, client_for, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory, WorkspaceFactory

META = {"schema_version": "1"}


def entries(action: str, **filters) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action, **filters).order_by("occurred_at", "id"))


def create_project(api: ApiClient, name: str = "Site", **headers) -> tuple[dict, object]:
    response = api.call(
        "/projects/create", {"name": name, "config": META, "tags": [], "meta": META}, headers=headers
    )
    return ok(response), response


# sources of change


def test_an_api_change_records_the_account_its_address_agent_and_request_id(member_of):
    workspace = WorkspaceFactory()
    account, api = member_of(workspace, "projects:*")

    project, response = create_project(api, **{"User-Agent": "audit-test/1.0"})

    [entry] = entries("project.create")
    assert entry.actor_id == account.pk and entry.actor_kind == "account"
    assert entry.workspace_id == workspace.pk
    assert (entry.resource_type, str(entry.resource_id)) == ("project", project["id"])
    assert entry.changes["name"] == {"before": None, "after": "Site"}
    assert entry.ip == "127.0.0.1" and entry.user_agent == "audit-test/1.0"
    assert entry.request_id == response["X-Request-ID"] and len(entry.request_id) == 32

    ok(api.call("/projects/update", {"id": project["id"], "name": "Shop", "tags": []}))
    [update] = entries("project.update")
    assert update.changes == {"name": {"before": "Site", "after": "Shop"}}  # tags did not change
    assert update.actor_id == account.pk
    ok(api.call("/projects/update", {"id": project["id"], "name": "Shop"}))
    assert len(entries("project.update")) == 1  # an update that changes nothing is no change


@pytest.mark.parametrize(
    ("forwarded", "recorded"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:0:0::1", "2001:db8::1"),
        ("not-an-address", None),
        ("", None),
    ],
)
def test_the_address_behind_a_trusted_proxy_is_recorded_when_it_is_one(db, forwarded, recorded):
    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}):
        response = ApiClient().call(
            "/auth/login",
            {"email": "nobody@example.com", "password": "wrong password!"},
            headers={"X-Forwarded-For": forwarded, "User-Agent": "agent\x00with a NUL"},
        )
    err(response, 401, "invalid credentials")
    [entry] = entries("account.login_failed")
    assert entry.ip == recorded and entry.user_agent == "agentwith a NUL"


def test_a_refused_change_leaves_no_entry(member_of):
    workspace = WorkspaceFactory()
    _, api = member_of(workspace, "projects:*")
    create_project(api, "Site")
    other, _ = create_project(api, "Shop")
    err(api.call("/projects/update", {"id": other["id"], "name": "Site"}), 409, "name already exists")
    assert entries("project.update") == []


def test_an_admin_change_records_the_operator(operator):
    web = Client()
    web.force_login(operator)
    account = AccountFactory()

    response = web.post(
        reverse("admin:accounts_account_changelist"),
        {"action": "disable_accounts", "_selected_action": [str(account.pk)]},
    )

    assert response.status_code == 302
    [entry] = entries("account.update", resource_id=account.pk)
    assert entry.actor_id == operator.pk and entry.actor_kind == "operator"
    assert entry.changes == {"enabled": {"before": True, "after": False}}
    assert entry.workspace_id is None  # accounts are global


def test_granting_operator_status_in_the_admin_is_recorded(operator):
    web = Client()
    web.force_login(operator)
    account = AccountFactory()
    page = web.get(reverse("admin:accounts_account_change", args=[account.pk]))
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() not in (None, False)}
    data = {k: ("on" if v is True else v) for k, v in data.items()}
    data["is_superuser"] = "on"
    for formset in page.context.get("inline_admin_formsets", []):
        management = formset.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management[name].value()

    response = web.post(reverse("admin:accounts_account_change", args=[account.pk]), data)

    assert response.status_code == 302, response.content[:500]
    [entry] = entries("account.update", resource_id=account.pk)
    assert entry.changes == {"is_superuser": {"before": False, "after": True}}
    assert entry.actor_id == operator.pk and entry.actor_kind == "operator"


def test_revoking_a_credential_in_the_admin_is_recorded_and_ends_the_sessions(operator, root):
    web = Client()
    web.force_login(operator)
    account = AccountFactory()
    credential = CredentialFactory(account=account, workspace=root)
    api = client_for(account)
    ok(api.call("/accounts/describe", {"id": str(account.pk)}))
    url = reverse("admin:authn_credential_change", args=[credential.pk])

    response = web.post(url, {"status": "revoked"})

    assert response.status_code == 302, response.content[:500]
    [entry] = entries("credential.update")
    assert entry.actor_id == operator.pk and entry.actor_kind == "operator"
    assert entry.changes == {"status": {"before": "active", "after": "revoked"}}
    assert entries("session.revoke", resource_id=account.pk)
    err(api.call("/accounts/describe", {"id": str(account.pk)}), 401)

    response = web.post(reverse("admin:authn_credential_delete", args=[credential.pk]), {"post": "yes"})
    assert response.status_code == 302
    [deleted] = entries("credential.delete")
    assert deleted.actor_id == operator.pk and deleted.changes["status"] == {
        "before": "revoked",
        "after": None,
    }


def test_a_command_change_records_the_command(db):
    call_command("bootstrap", "--email", "boss@example.com", "--password", PASSWORD, stdout=io.StringIO())

    account = Account.objects.get(email="boss@example.com")
    [created] = entries("account.create")
    assert created.resource_id == account.pk
    assert created.actor_kind == "command" and created.actor_id is None
    assert created.changes["email"] == {"before": None, "after": "boss@example.com"}
    # Through the services: the verified flag (update_account), operator status (set_operator), the
    # password credential activated (update_credential), each recorded as the command's.
    flags = entries("account.update", resource_id=account.pk)
    assert {entry.actor_kind for entry in flags} == {"command"}
    assert sorted([entry.changes for entry in flags], key=str) == [
        {"is_superuser": {"before": False, "after": True}},
        {"verified": {"before": False, "after": True}},
    ]
    [activated] = entries("credential.update")
    assert activated.actor_kind == "command" and activated.actor_id is None
    assert activated.changes == {"status": {"before": "pending", "after": "active"}}
    [owner] = entries("membership.create")
    assert owner.actor_kind == "command" and owner.changes["account_id"]["after"] == str(account.pk)
    updated = Event.objects.filter(payload__type="account.updated")
    assert updated.count() == 2  # verified, then operator: each changes what the account may do

    call_command("bootstrap", "--email", "boss@example.com", "--password", PASSWORD, stdout=io.StringIO())
    assert len(entries("account.update", resource_id=account.pk)) == 2  # nothing changed the second time
    assert len(entries("credential.update")) == 1
    assert updated.count() == 2


def test_bootstrap_makes_an_existing_account_an_operator_on_the_record_and_at_once(db, root):
    account = AccountFactory(email="boss@example.com", verified=True)
    credential = CredentialFactory(account=account, workspace=root, status="revoked")
    api = client_for(account)
    err(api.call("/accounts/list", {}), 403)  # the account is now cached

    call_command("bootstrap", "--email", "boss@example.com", "--password", PASSWORD, stdout=io.StringIO())

    [flags] = entries("account.update", resource_id=account.pk)
    assert flags.actor_kind == "command"
    assert flags.changes == {"is_superuser": {"before": False, "after": True}}
    [activated] = entries("credential.update", resource_id=credential.pk)
    assert activated.actor_kind == "command"
    assert activated.changes == {"status": {"before": "revoked", "after": "active"}}
    ok(api.call("/accounts/list", {}))  # the cached copy went with the change


def test_the_worker_giving_up_on_a_message_records_the_system(db, monkeypatch):
    def undeliverable(message):
        raise outbox.Undeliverable("no such mailbox")

    monkeypatch.setitem(outbox._handlers, "audit.test", undeliverable)
    message = OutboxMessage.objects.create(topic="audit.test", deadline=timezone.now() + timedelta(hours=1))

    assert process_outbox_message.apply(args=[str(message.pk)]).get() == "failed"

    [entry] = entries("outbox.fail")
    assert entry.actor_kind == "system" and entry.actor_id is None
    assert (entry.resource_type, entry.resource_id) == ("outbox_message", message.pk)
    assert entry.changes == {"topic": "audit.test", "status": {"before": "pending", "after": "failed"}}
    assert entry.ip is None and entry.request_id == ""


def test_an_operator_retrying_a_message_in_the_admin_is_recorded(operator):
    web = Client()
    web.force_login(operator)
    failed = OutboxMessage.objects.create(topic="push.event", status="failed", deadline=timezone.now())
    web.post(
        reverse("admin:iam_outboxmessage_changelist"),
        {"action": "retry_messages", "_selected_action": [str(failed.pk)]},
    )
    [entry] = entries("outbox.retry")
    assert entry.actor_id == operator.pk and entry.actor_kind == "operator"
    assert entry.changes["status"] == {"before": "failed", "after": "pending"}


# logins and sessions


def login(api: ApiClient, email: str, password: str = PASSWORD):
    return api.call("/auth/login", {"email": email, "password": password})


def test_logins_failures_throttles_and_disabled_accounts_are_recorded(api, root):
    account = AccountFactory()
    CredentialFactory(account=account, workspace=root)
    ok(login(api, account.email))
    [entry] = entries("account.login")
    assert entry.actor_id == account.pk and entry.resource_id == account.pk

    for _ in range(5):
        err(login(api, account.email, "wrong password!"), 401, "invalid credentials")
    err(login(api, account.email), 429, "too many failed login attempts")
    failed = entries("account.login_failed")
    assert len(failed) == 5
    assert failed[0].changes == {"email": account.email, "reason": "invalid"}
    assert failed[0].actor_id is None and failed[0].resource_id == account.pk
    err(login(api, account.email), 429, "too many failed login attempts")
    # refused before any password check: recorded once a minute per address and client, not per attempt
    [throttled] = entries("account.login_throttled")
    assert throttled.changes == {"email": account.email}

    err(login(api, "nobody@example.com", "wrong password!"), 401, "invalid credentials")
    assert (
        entries("account.login_failed", resource_id__isnull=True)[0].changes["email"] == "nobody@example.com"
    )

    err(login(api, "correct horse battery", "wrong password!"), 401, "invalid credentials")
    # a password typed into the e-mail field does not reach the log
    assert entries("account.login_failed", resource_id__isnull=True)[1].changes == {
        "email": "(not an e-mail address)",
        "reason": "invalid",
    }

    disabled = AccountFactory(enabled=False)
    CredentialFactory(account=disabled, workspace=root)
    err(login(api, disabled.email), 403, "account disabled")
    assert entries("account.login_failed", resource_id=disabled.pk)[0].changes["reason"] == "disabled"


def test_refresh_token_reuse_and_revocation_are_recorded(api, root):
    account = AccountFactory()
    CredentialFactory(account=account, workspace=root)
    session = ok(login(api, account.email))
    ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))
    err(ApiClient(session["refresh_token"]).call("/auth/refresh"), 401)

    [reuse] = entries("session.refresh_reuse")
    assert reuse.resource_id == account.pk and reuse.actor_id == account.pk
    [revoked] = entries("session.revoke")
    version = revoked.changes["session_version"]
    assert version["after"] == version["before"] + 1 == Account.objects.get(pk=account.pk).session_version

    fresh = ok(login(api, account.email))
    ok(ApiClient(fresh["access_token"]).call("/auth/revoke"))
    assert [entry.actor_id for entry in entries("session.revoke")] == [account.pk, account.pk]


# no secret, hash or token in an entry


def test_record_redacts_every_secret_field_whatever_the_caller_passes(db):
    entry = audit.record(
        "test.secrets",
        resource=("account", None),
        changes={
            "password": "hunter2hunter2",
            "client_secret": "s3cret",
            "secret_digest": "abc",
            "secret_encrypted": "gAAAA",
            "password_hash": "$argon2id$",
            "access_token": "eyJ",
            "code_verifier": "v",
            "meta": {"before": {"refresh_token": "eyJ", "plan": "gold"}, "after": None},
            "name": {"before": "a", "after": "b"},
        },
    )
    entry.refresh_from_db()
    redacted = audit.REDACTED
    assert entry.changes == {
        "password": redacted,
        "client_secret": redacted,
        "secret_digest": redacted,
        "secret_encrypted": redacted,
        "password_hash": redacted,
        "access_token": redacted,
        "code_verifier": redacted,
        "meta": {"before": {"refresh_token": redacted, "plan": "gold"}, "after": None},
        "name": {"before": "a", "after": "b"},
    }


def test_no_secret_hash_or_token_lands_in_the_log(operator_api, root, api):
    registered = ok(api.call("/auth/register", {"email": "new@example.com", "password": PASSWORD}))
    account = Account.objects.get(email="new@example.com")
    credential = Credential.objects.get(account=account)
    new_password = "another correct horse"
    ok(
        operator_api.in_workspace(root).call(
            "/credentials/update",
            {
                "id": str(credential.pk),
                "account_id": str(account.pk),
                "secret": new_password,
                "status": "active",
            },
        )
    )
    session = ok(login(api, account.email, new_password))
    refreshed = ok(ApiClient(session["refresh_token"]).call("/auth/refresh"))
    clients = operator_api.in_workspace(root)
    created = ok(clients.call("/clients/create", {"name": "svc", "tags": [], "meta": META}))
    rotated = ok(clients.call("/clients/regenerate-secret", {"id": created["id"]}))
    account.refresh_from_db()
    client = ServiceClient.objects.get(pk=created["id"])

    logged = json.dumps([entry.changes for entry in AuditEntry.objects.all()])
    assert {"credential.update", "account.password_set", "client.create", "client.regenerate_secret"} <= set(
        AuditEntry.objects.values_list("action", flat=True)
    )
    secrets = [
        PASSWORD,
        new_password,
        account.password,
        created["secret"],
        rotated["secret"],
        client.secret_digest,
        client.secret_encrypted,
        registered["access_token"],
        registered["refresh_token"],
        session["access_token"],
        session["refresh_token"],
        refreshed["refresh_token"],
    ]
    for secret in secrets:
        assert secret and secret not in logged
    [update] = entries("credential.update")
    # `secret` is not a field of the credential: the password's own entry says it changed
    assert update.changes == {"status": {"before": "pending", "after": "active"}}
    assert update.actor_id == Account.objects.get(email="operator@example.com").pk


# POST /audit/list


def audit_list(api: ApiClient, body: dict | None = None):
    return api.call("/audit/list", body or {})


def test_audit_list_needs_its_permission(member_of):
    workspace = WorkspaceFactory()
    _, api = member_of(workspace, "projects:*")
    err(audit_list(api), 403, "missing permission audit:list")
    err(audit_list(client_for(AccountFactory())), 400, "workspace required")
    err(audit_list(ApiClient()), 401, "Authentication required or invalid credentials.")


def test_a_workspace_sees_its_own_entries_only(member_of, root):
    ours, theirs = WorkspaceFactory(), WorkspaceFactory()
    _, our_writer = member_of(ours, "projects:*")
    _, their_writer = member_of(theirs, "projects:*")
    auditor, our_auditor = member_of(ours, "audit:list")
    _, their_auditor = member_of(theirs, "audit:list")
    our_project, _ = create_project(our_writer, "Ours")
    their_project, _ = create_project(their_writer, "Theirs")
    CredentialFactory(account=auditor, workspace=root)
    ok(ApiClient().call("/auth/login", {"email": auditor.email, "password": PASSWORD}))  # a global entry

    data = ok(audit_list(our_auditor))
    assert [e["resource_id"] for e in data["entries"]] == [our_project["id"]]
    assert data["metadata"]["total"] == 1 and data["metadata"]["order_bys"] == ["!occurred_at"]
    assert data["entries"][0]["workspace_id"] == str(ours.pk)
    body = {"filter": {"fields": {"resource_id": their_project["id"]}}}
    assert ok(audit_list(our_auditor, body))["metadata"]["total"] == 0
    assert ok(audit_list(their_auditor, body))["metadata"]["total"] == 1
    err(audit_list(our_auditor.in_workspace(theirs)), 403, "not a member of this workspace")


def test_the_root_workspace_also_sees_global_entries(root, member_of):
    auditor, api = member_of(root, "audit:list")
    tenant = WorkspaceFactory()
    _, writer = member_of(tenant, "projects:*")
    create_project(writer)
    CredentialFactory(account=auditor, workspace=root)
    ok(ApiClient().call("/auth/login", {"email": auditor.email, "password": PASSWORD}))

    data = ok(audit_list(api))
    assert [(e["action"], e["workspace_id"]) for e in data["entries"]] == [("account.login", None)]


def test_audit_list_filters_and_order(member_of):
    workspace = WorkspaceFactory()
    writer, api = member_of(workspace, "projects:*", "audit:list")
    first, _ = create_project(api, "One")
    ok(api.call("/projects/update", {"id": first["id"], "name": "Uno"}))
    create_project(api, "Two")

    everything = ok(audit_list(api, {"options": {"order_bys": "occurred_at"}}))["entries"]
    assert [e["action"] for e in everything] == ["project.create", "project.update", "project.create"]
    by_resource = ok(audit_list(api, {"filter": {"fields": {"resource_id": first["id"]}}}))["entries"]
    assert [e["action"] for e in by_resource] == ["project.update", "project.create"]  # newest first
    updates = {"filter": {"fields": {"action": "project.update", "actor_id": str(writer.pk)}}}
    [update] = ok(audit_list(api, updates))["entries"]
    assert update["changes"] == {"name": {"before": "One", "after": "Uno"}}
    assert update["actor_kind"] == "account" and update["resource_type"] == "project"
    assert ok(audit_list(api, {"filter": {"fields": {"resource_type": "role"}}}))["metadata"]["total"] == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"filter": {"fields": {"ip": "127.0.0.1"}}}, "unknown filter field: ip"),
        ({"options": {"order_bys": "created_at"}}, "unknown filter field: created_at"),
        ({"filter": {"tags": ["a"]}}, "unknown filter field: tags"),
        ({"filter": {"fields": {"actor_id": "not-a-uuid"}}}, "invalid value for filter field: actor_id"),
        ({"options": {"limit": 1001}}, "options.limit must be at most 1000"),
    ],
)
def test_audit_list_refuses_what_it_does_not_know(member_of, body, message):
    _, api = member_of(WorkspaceFactory(), "audit:list")
    err(audit_list(api, body), 400, message)


def test_audit_list_query_budget(member_of, django_assert_max_num_queries):
    workspace = WorkspaceFactory()
    _, api = member_of(workspace, "projects:*", "audit:list")
    for name in ("A", "B", "C", "D"):
        create_project(api, name)
    ok(audit_list(api))  # warms the caller's cached grants
    with django_assert_max_num_queries(4):
        assert ok(audit_list(api))["metadata"]["count"] == 4


# append-only


def test_entries_cannot_be_changed_or_deleted_over_the_api(member_of):
    _, api = member_of(WorkspaceFactory(), "*")
    for path in ("/audit/update", "/audit/delete", "/audit/create"):
        err(api.call(path, {}), 404, "not found")


def test_the_admin_shows_entries_read_only(operator):
    web = Client()
    web.force_login(operator)
    entry = audit.record("test.entry", resource=("account", operator.pk), changes={"name": "x"})
    changelist = web.get(reverse("admin:iam_auditentry_changelist"), {"action__exact": "test.entry"})
    assert changelist.status_code == 200 and b"test.entry" in changelist.content
    assert web.get(reverse("admin:iam_auditentry_changelist"), {"q": "not-a-uuid"}).status_code == 200
    page = web.get(reverse("admin:iam_auditentry_change", args=[entry.pk]))
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert web.get(reverse("admin:iam_auditentry_add")).status_code == 403
    assert (
        web.post(reverse("admin:iam_auditentry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    )
    web.post(reverse("admin:iam_auditentry_change", args=[entry.pk]), {"action": "changed"})
    entry.refresh_from_db()
    assert entry.action == "test.entry"
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


# retention


def test_cleanup_drops_entries_past_the_retention(db):
    old = audit.record("test.old", resource=("account", None))
    recent = audit.record("test.recent", resource=("account", None))
    AuditEntry.objects.filter(pk=old.pk).update(occurred_at=timezone.now() - timedelta(days=31))
    AuditEntry.objects.filter(pk=recent.pk).update(occurred_at=timezone.now() - timedelta(days=29))

    with override_settings(IAM_AUDIT_RETENTION_DAYS=30):
        call_command("cleanup", stdout=io.StringIO())

    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["test.recent"]


def test_the_default_retention_is_a_year(db):
    kept = audit.record("test.kept", resource=("account", None))
    AuditEntry.objects.filter(pk=kept.pk).update(occurred_at=timezone.now() - timedelta(days=364))
    call_command("cleanup", stdout=io.StringIO())
    assert AuditEntry.objects.filter(pk=kept.pk).exists()


def test_outside_any_request_or_command_the_actor_is_the_system(db):
    assert context.current().actor_kind == "system"
    assert audit.record("test.system", resource=("account", None)).actor_kind == "system"


def test_create_workspace_records_the_workspace_as_the_commands(db):
    owner = AccountFactory(email="owner@example.com")
    call_command("create_workspace", slug="acme", name="Acme", owner_email=owner.email, stdout=io.StringIO())

    [created] = entries("workspace.create")
    assert created.actor_kind == "command" and created.actor_id is None
    assert created.changes["slug"] == {"before": None, "after": "acme"}
    assert created.workspace_id == created.resource_id
    [owned] = entries("membership.create", workspace_id=created.resource_id)
    assert owned.changes["account_id"]["after"] == str(owner.pk)

    call_command("create_workspace", slug="acme", name="Acme", owner_email=owner.email, stdout=io.StringIO())
    assert len(entries("workspace.create")) == 1


def test_a_workspace_created_over_the_api_is_recorded_as_its_creators(db):
    creator, other = AccountFactory(), AccountFactory()
    body = {"name": "Acme", "slug": "acme", "config": META, "tags": ["prod"], "meta": META}
    created = ok(client_for(creator).call("/workspace/create", body))
    ok(client_for(other).call("/workspace/create", {**body, "slug": "other"}))

    [entry] = entries("workspace.create", resource_id=created["id"])
    assert entry.actor_id == creator.pk and entry.actor_kind == "account"
    assert {e.actor_id for e in entries("workspace.create")} == {creator.pk, other.pk}
