"""The admin of applications and consents (docs/oidc.md#applications): listed, shown, deleted through the
services (a deleted application's tokens stop; a deleted consent is a revoked one, audited)."""

from django.test import Client
from django.urls import reverse

from authn.models import Session
from iam.models import AuditEntry
from oidc.models import Application, Consent
from tests.oidc.conftest import signed_in_tokens


def test_applications_and_consents_are_listed(admin_web, world):
    Consent.objects.create(account=world.alice, application=world.crm.application, scopes=["openid"])
    page = admin_web.get(reverse("admin:oidc_application_changelist")).content.decode()
    for name in ("Portal", "Acme CRM", "Globex Wiki"):
        assert name in page
    assert world.portal.secret not in page
    page = admin_web.get(reverse("admin:oidc_consent_changelist")).content.decode()
    assert "alice@example.com" in page and "Acme CRM" in page
    shown = admin_web.get(reverse("admin:oidc_application_change", args=[world.crm.application.pk]))
    assert shown.status_code == 200
    assert admin_web.get(reverse("admin:oidc_application_add")).status_code == 403


def test_deleting_an_application_in_the_admin_ends_its_sessions(admin_web, world):
    signed_in_tokens(Client(), world.portal, world.bob)
    url = reverse("admin:oidc_application_delete", args=[world.portal.application.pk])
    assert admin_web.post(url, {"post": "yes"}).status_code == 302
    assert not Application.objects.filter(pk=world.portal.application.pk).exists()
    [session] = Session.objects.filter(application_id=world.portal.application.pk)
    assert session.revoked_at is not None
    assert AuditEntry.objects.filter(action="application.delete").exists()


def test_deleting_a_consent_in_the_admin_revokes_it(admin_web, world):
    consent = Consent.objects.create(
        account=world.alice, application=world.crm.application, scopes=["openid"]
    )
    url = reverse("admin:oidc_consent_delete", args=[consent.pk])
    assert admin_web.post(url, {"post": "yes"}).status_code == 302
    assert not Consent.objects.exists()
    [entry] = AuditEntry.objects.filter(action="consent.revoke")
    assert entry.workspace_id == world.acme.pk
