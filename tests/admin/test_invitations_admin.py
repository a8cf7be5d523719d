"""Invitations by e-mail in the admin: listed per workspace, resent and revoked
through the services the API calls, each recorded with the operator as the actor."""

from datetime import timedelta

from django.core import mail
from django.urls import reverse
from django.utils import timezone

from iam.models import AuditEntry, OutboxMessage
from iam.platform import outbox
from rbac.models import Invitation
from tests.conftest import ApiClient, err
from tests.factories import RoleFactory, WorkspaceFactory

CHANGELIST = "admin:rbac_invitation_changelist"


def make(workspace, email: str, **fields) -> Invitation:
    invitation = Invitation.objects.create(
        workspace=workspace,
        email=email,
        scope="workspace",
        expires_at=timezone.now() + timedelta(days=7),
        meta={"schema_version": "1"},
        **fields,
    )
    invitation.roles.set([RoleFactory(workspace=workspace)])
    return invitation


def send_outbox() -> None:
    for message in OutboxMessage.objects.filter(topic="email", status="pending"):
        outbox.process(message.pk)


def test_invitations_are_listed_per_workspace(admin_web):
    a, b = WorkspaceFactory(slug="alpha"), WorkspaceFactory(slug="beta")
    make(a, "in-a@example.com")
    make(b, "in-b@example.com")
    page = admin_web.get(reverse(CHANGELIST), {"workspace__id__exact": str(a.pk)}).content.decode()
    assert "in-a@example.com" in page and "in-b@example.com" not in page
    workspace_page = admin_web.get(reverse("admin:tenancy_workspace_change", args=[a.pk])).content.decode()
    assert "in-a@example.com" in workspace_page and "in-b@example.com" not in workspace_page
    found = admin_web.get(reverse(CHANGELIST), {"q": "in-b@"}).content.decode()
    assert "in-b@example.com" in found and "in-a@example.com" not in found


def test_resend_and_revoke_go_through_the_services(admin_web, operator):
    workspace = WorkspaceFactory()
    pending = make(workspace, "pending@example.com")
    old_expiry = pending.expires_at
    revoked = make(workspace, "revoked@example.com", status="revoked")
    response = admin_web.post(
        reverse(CHANGELIST),
        {"action": "resend_invitations", "_selected_action": [str(pending.pk), str(revoked.pk)]},
        follow=True,
    )
    page = response.content.decode()
    assert "1 invitation(s) resent." in page and "1 invitation(s) skipped" in page
    pending.refresh_from_db()
    assert pending.expires_at > old_expiry
    send_outbox()
    assert [message.to for message in mail.outbox] == [["pending@example.com"]]
    entry = AuditEntry.objects.get(action="invitation.resend")
    assert (entry.actor_id, entry.workspace_id, entry.resource_id) == (operator.pk, workspace.pk, pending.pk)

    revoke = {"action": "revoke_invitations", "_selected_action": [str(pending.pk)]}
    admin_web.post(reverse(CHANGELIST), revoke)
    pending.refresh_from_db()
    assert pending.status == "revoked"
    assert AuditEntry.objects.get(action="invitation.revoke").actor_id == operator.pk
    token = mail.outbox[0].body.split("token=")[1].split()[0]
    err(ApiClient().call("/invitations/accept", {"token": token}), 404, "invitation not found")
