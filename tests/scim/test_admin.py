"""The SCIM admin: each workspace's tokens (never the token nor its digest; deleting one cuts its
directory off) and the last SCIM requests with their outcome, so an operator sees why a sync fails."""

from django.urls import reverse

from iam.models import AuditEntry
from scim.models import ScimToken

from .conftest import scim_err, scim_ok, user_body


def test_tokens_and_the_last_requests_with_their_outcome(admin_web, scim, workspace):
    token = ScimToken.objects.get(workspace=workspace)
    scim_ok(scim.post("/Users", user_body("ok@acme.test")), 201)
    scim_err(scim.get("/Users", filter='nickName eq "x"'), 400, "invalidFilter")
    tokens = admin_web.get(reverse("admin:scim_scimtoken_changelist")).content.decode()
    assert token.name in tokens and token.token_digest not in tokens and scim.token not in tokens
    page = admin_web.get(reverse("admin:scim_scimtoken_change", args=[token.pk])).content.decode()
    assert token.token_digest not in page and scim.token not in page
    requests = admin_web.get(
        reverse("admin:scim_scimrequest_changelist") + "?outcome=refused"
    ).content.decode()
    assert "invalidFilter" in requests and "unsupported filter" in requests and "ok@acme.test" not in requests
    listed = admin_web.get(reverse("admin:scim_scimrequest_changelist") + f"?token__id__exact={token.pk}")
    assert listed.status_code == 200 and "/Users" in listed.content.decode()


def test_deleting_a_token_in_the_admin_refuses_its_directory(admin_web, scim, workspace):
    token = ScimToken.objects.get(workspace=workspace)
    response = admin_web.post(reverse("admin:scim_scimtoken_delete", args=[token.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not ScimToken.objects.filter(pk=token.pk).exists()
    assert AuditEntry.objects.filter(action="scimtoken.delete", actor_kind="operator").exists()
    scim_err(scim.get("/Users"), 401)


def test_the_audit_log_names_the_token_that_acted(admin_web, scim, workspace):
    token = ScimToken.objects.get(workspace=workspace)
    scim_ok(scim.post("/Users", user_body("named@acme.test")), 201)
    entry = AuditEntry.objects.get(action="membership.create")
    assert entry.actor_kind == "scim" and entry.actor_id == token.pk
    listing = admin_web.get(reverse("admin:iam_auditentry_changelist") + "?actor_kind=scim").content.decode()
    assert f"SCIM token {token.name}" in listing


def test_cleanup_keeps_the_request_log_so_many_days(scim, workspace, settings):
    import datetime as dt
    import io

    from django.core.management import call_command
    from django.utils import timezone

    from scim.models import ScimRequest

    settings.IAM_SCIM_LOG_DAYS = 7
    scim_ok(scim.get("/Users"))
    scim_ok(scim.get("/Groups"))
    old = ScimRequest.objects.filter(workspace=workspace).order_by("occurred_at").first()
    ScimRequest.objects.filter(pk=old.pk).update(occurred_at=timezone.now() - dt.timedelta(days=8))
    out = io.StringIO()
    call_command("cleanup", stdout=out)
    assert "deleted 1 scim requests" in out.getvalue()
    assert list(ScimRequest.objects.filter(workspace=workspace).values_list("path", flat=True)) == [
        f"/scim/v2/{workspace.pk}/Groups"
    ]
