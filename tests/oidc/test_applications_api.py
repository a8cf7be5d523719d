"""`applications/*` (docs/api.md#applications) over HTTP: the shape, the secret shown once, the redirect URI
rules, first party, the quota, the audit entries, another workspace's applications out of reach."""

import re

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from iam.models import AuditEntry
from iam.platform import crypto
from oidc.models import Application
from tests.conftest import client_for, err, ok
from tests.factories import WorkspaceFactory

BODY = {
    "name": "Billing",
    "type": "web",
    "redirect_uris": ["https://billing.example.com/cb"],
    "tags": ["a"],
    "meta": {"schema_version": "1"},
}
FIELDS = {
    "id",
    "workspace_id",
    "name",
    "type",
    "client_id",
    "redirect_uris",
    "post_logout_redirect_uris",
    "grant_types",
    "service_account_id",
    "first_party",
    "tags",
    "meta",
    "created_at",
    "updated_at",
}

pytestmark = pytest.mark.admin("applications:*")


def create(api, **fields):
    return ok(api.call("/applications/create", {**BODY, **fields}))


def test_a_web_application_answers_its_secret_once_stored_as_a_digest(admin, workspace):
    data = create(admin, post_logout_redirect_uris=["https://billing.example.com/"])
    assert set(data) == FIELDS | {"client_secret"}
    assert data["client_id"] == data["id"]
    assert data["workspace_id"] == str(workspace.pk)
    assert data["grant_types"] == ["authorization_code", "refresh_token"]
    assert data["first_party"] is False
    assert data["service_account_id"] is None
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", data["client_secret"])
    stored = Application.objects.get(pk=data["id"])
    assert stored.secret_digest == crypto.digest(data["client_secret"])
    assert set(ok(admin.call("/applications/describe", {"id": data["id"]}))) == FIELDS
    assert set(ok(admin.call("/applications/list", {}))["applications"][0]) == FIELDS


@pytest.mark.parametrize("kind", ["spa", "native"])
def test_public_applications_have_no_secret(admin, kind):
    data = create(admin, type=kind)
    assert data["client_secret"] is None
    assert Application.objects.get(pk=data["id"]).secret_digest == ""
    err(
        admin.call("/applications/regenerate-secret", {"id": data["id"]}),
        400,
        "only web applications have a secret",
    )


def test_regenerate_secret_replaces_the_old_one(admin):
    data = create(admin)
    again = ok(admin.call("/applications/regenerate-secret", {"id": data["id"]}))
    assert set(again) == FIELDS | {"client_secret"}
    assert again["client_secret"] != data["client_secret"]
    stored = Application.objects.get(pk=data["id"])
    assert not crypto.digest_matches(data["client_secret"], stored.secret_digest)
    assert crypto.digest_matches(again["client_secret"], stored.secret_digest)


def test_an_application_of_the_root_workspace_is_first_party(operator, root):
    data = create(client_for(operator, root))
    assert data["first_party"] is True


@pytest.mark.parametrize(
    ("kind", "uri", "reason"),
    [
        ("web", "http://billing.example.com/cb", "http is only for 127.0.0.1, [::1] or localhost"),
        ("web", "http://127.0.0.1:3000/cb", "web applications must use https"),
        ("spa", "http://localhost:3000/cb", "spa applications must use https"),
        ("web", "https://*.example.com/cb", "must not contain a wildcard"),
        ("web", "https://billing.example.com/cb#x", "must not contain a fragment"),
        ("web", "/cb", "must be an absolute URL"),
        ("web", "com.example.app:/cb", "must be an absolute URL"),
        ("native", "myapp://callback", "must use https"),
        (
            "web",
            "https://billing.example.com/c b",
            "must not contain spaces, control or non-ASCII characters",
        ),
        ("web", "https://user:pw@billing.example.com/cb", "must not contain a user name or password"),
        ("web", "https://billing.example.com:99999/cb", "must be a valid URL"),
        ("web", "", "must be a non-empty string"),
    ],
)
def test_redirect_uris_follow_the_rules(admin, kind, uri, reason):
    body = {**BODY, "type": kind, "redirect_uris": [uri]}
    answer = err(admin.call("/applications/create", body), 400, f"redirect_uri not allowed: {reason}")
    assert answer["field"] == "redirect_uris"
    body = {**BODY, "type": kind, "post_logout_redirect_uris": [uri]}
    answer = err(admin.call("/applications/create", body), 400, f"redirect_uri not allowed: {reason}")
    assert answer["field"] == "post_logout_redirect_uris"


def test_loopback_http_is_for_native_applications_and_for_everyone_with_debug(admin, settings):
    for uri in ("http://127.0.0.1/cb", "http://[::1]:8080/cb", "http://localhost/cb"):
        create(admin, type="native", redirect_uris=[uri])
    with override_settings(DEBUG=True):
        create(admin, type="web", redirect_uris=["http://127.0.0.1:3000/cb"])
        create(admin, type="spa", redirect_uris=["http://localhost:3000/cb"])


def test_grant_types(admin):
    answer = err(
        admin.call("/applications/create", {**BODY, "type": "spa", "grant_types": ["client_credentials"]}),
        400,
        "client_credentials is for web applications",
    )
    assert answer["field"] == "grant_types"
    err(
        admin.call("/applications/create", {**BODY, "grant_types": ["client_credentials"]}),
        400,
        "service_account_id required",
    )
    err(
        admin.call("/applications/create", {**BODY, "grant_types": ["password"]}),
        400,
        "grant_types must hold only authorization_code, refresh_token, client_credentials",
    )
    err(admin.call("/applications/create", {**BODY, "redirect_uris": []}), 400, "redirect_uris required")
    data = create(admin, grant_types=["authorization_code"])
    assert data["grant_types"] == ["authorization_code"]


def test_create_validation(admin):
    err(admin.call("/applications/create", {**BODY, "name": None}), 400, "name required")
    err(
        admin.call("/applications/create", {**BODY, "type": "mobile"}),
        400,
        "type must be one of web, spa, native",
    )
    err(admin.call("/applications/create", {**BODY, "redirect_uris": "x"}), 400)
    err(
        admin.call("/applications/create", {**BODY, "redirect_uris": [5]}),
        400,
        "redirect_uris must be an array of strings",
    )


def test_update_changes_what_is_sent_and_keeps_the_type(admin):
    data = create(admin)
    updated = ok(
        admin.call(
            "/applications/update",
            {"id": data["id"], "name": "Invoices", "type": "spa", "redirect_uris": ["https://x.example/cb"]},
        )
    )
    assert (updated["name"], updated["type"], updated["redirect_uris"]) == (
        "Invoices",
        "web",
        ["https://x.example/cb"],
    )
    assert updated["updated_at"] is not None
    err(
        admin.call("/applications/update", {"id": data["id"], "redirect_uris": ["http://x.example/cb"]}),
        400,
        "redirect_uri not allowed: http is only for 127.0.0.1, [::1] or localhost",
    )


def test_delete_answers_the_id(admin):
    data = create(admin)
    assert ok(admin.call("/applications/delete", {"id": data["id"]})) == {"id": data["id"]}
    err(admin.call("/applications/describe", {"id": data["id"]}), 404, "application not found")


def test_every_change_is_audited(admin, workspace):
    data = create(admin)
    admin.call("/applications/update", {"id": data["id"], "name": "Other"})
    admin.call("/applications/regenerate-secret", {"id": data["id"]})
    admin.call("/applications/delete", {"id": data["id"]})
    entries = AuditEntry.objects.filter(resource_id=data["id"]).order_by("occurred_at")
    assert [entry.action for entry in entries] == [
        "application.create",
        "application.update",
        "application.secret_regenerate",
        "application.delete",
    ]
    assert {entry.workspace_id for entry in entries} == {workspace.pk}
    assert data["client_secret"] not in str([entry.changes for entry in entries])


def test_another_workspaces_applications_are_out_of_reach(admin, member_of):
    other_workspace = WorkspaceFactory()
    _, other = member_of(other_workspace, "applications:*")
    theirs = create(other)
    for action in ("describe", "update", "delete", "regenerate-secret"):
        err(admin.call(f"/applications/{action}", {"id": theirs["id"]}), 404, "application not found")
    assert ok(admin.call("/applications/list", {}))["applications"] == []
    assert [app["id"] for app in ok(other.call("/applications/list", {}))["applications"]] == [theirs["id"]]


def test_a_member_without_the_permission_is_refused(member_of, workspace):
    _, reader = member_of(workspace, "applications:list")
    err(reader.call("/applications/create", BODY), 403, "missing permission applications:create")
    ok(reader.call("/applications/list", {}))


@override_settings(IAM_QUOTA_APPLICATIONS=2)
def test_the_quota(admin, operator, workspace):
    create(admin)
    create(admin)
    err(admin.call("/applications/create", BODY), 403, "quota reached: applications (2)")
    create(client_for(operator, workspace))  # operators are exempt


def test_list_filters(admin):
    create(admin, name="a")
    create(admin, name="b", type="spa")
    listed = ok(admin.call("/applications/list", {"filter": {"fields": {"type": "spa"}}}))["applications"]
    assert [app["name"] for app in listed] == ["b"]
    err(admin.call("/applications/list", {"filter": {"fields": {"secret_digest": "x"}}}), 400)


def test_the_list_reads_a_fixed_number_of_queries(admin):
    create(admin)
    with CaptureQueriesContext(connection) as one:
        ok(admin.call("/applications/list", {}))
    for _ in range(5):
        create(admin)
    with CaptureQueriesContext(connection) as six:
        assert len(ok(admin.call("/applications/list", {}))["applications"]) == 6
    assert len(six.captured_queries) == len(one.captured_queries) <= 12


def test_a_service_account_is_named_only_with_client_credentials(admin):
    named = {"service_account_id": "00000000-0000-0000-0000-000000000001"}
    data = create(admin, **named)
    assert data["service_account_id"] is None
    updated = ok(admin.call("/applications/update", {"id": data["id"], **named}))
    assert updated["service_account_id"] is None
