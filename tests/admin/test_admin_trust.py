"""docs/operations.md#the-admin-and-management-commands in the admin: an operator's change goes through the
API's services, so it ends the same sessions and owes the same events."""

from django.urls import reverse

from iam.models import Event
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
    assert Event.objects.filter(payload__type="session.revoked").exists()


def test_the_admin_sign_in_counts_failed_logins_with_the_api(db, operator):
    """The docs/api.md#throttling limit (5 failures per e-mail in 15 minutes) holds for the admin's form too,
    and the failures add up with the API's: the admin is no side door for guessing an operator's password."""
    from django.test import Client

    web = Client()
    for _ in range(3):
        ApiClient().call("/auth/login", {"email": operator.email, "password": "wrong-guess"})
    for _ in range(2):
        web.post("/admin/login/", {"username": operator.email, "password": "wrong-guess"})
    response = web.post("/admin/login/?next=/admin/", {"username": operator.email, "password": PASSWORD})
    assert response.status_code == 200 and "_auth_user_id" not in web.session  # refused: throttled
    err(login(operator.email), 429, "too many failed login attempts")


def test_a_successful_admin_sign_in_resets_the_count(db, operator):
    from django.test import Client

    CredentialFactory(account=operator)
    web = Client()
    for _ in range(4):
        web.post("/admin/login/", {"username": operator.email, "password": "wrong-guess"})
    response = web.post("/admin/login/?next=/admin/", {"username": operator.email, "password": PASSWORD})
    assert response.status_code == 302
    web.post("/admin/login/", {"username": operator.email, "password": "wrong-guess"})
    ok(login(operator.email))
