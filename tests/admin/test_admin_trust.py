"""Issue 11 item 6 in the admin: an operator's change goes through the API's services, so it ends the
same sessions and owes the same events."""

from django.urls import reverse

from iam.models import OutboxMessage
from tests.admin.conftest import form_data
from tests.conftest import ApiClient, err, ok
from tests.factories import PASSWORD, AccountFactory, CredentialFactory

AUTH = "Authentication required or invalid credentials."


def login(email: str):
    return ApiClient().call("/auth/login", {"email": email, "password": PASSWORD})


def test_revoking_a_credential_in_the_admin_ends_the_accounts_sessions(admin_web):
    victim = AccountFactory()
    credential = CredentialFactory(account=victim)
    session = ok(login(victim.email))
    url = reverse("admin:authn_credential_change", args=[credential.pk])
    data = {**form_data(admin_web.get(url)), "status": "revoked"}
    response = admin_web.post(url, data)
    assert response.status_code == 302, response.content
    err(ApiClient(session["access_token"]).call("/accounts/describe", {"id": str(victim.pk)}), 401, AUTH)
    err(login(victim.email), 401, "invalid credentials")
    assert OutboxMessage.objects.filter(topic="push.event", payload__type="session.revoked").exists()
