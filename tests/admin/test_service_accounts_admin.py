"""The admin's service accounts (docs/api.md#service-accounts): created, changed and their keys revoked
through the services the API calls."""

from django.urls import reverse

from iam.models import Event
from rbac.models import ServiceAccount, ServiceAccountKey
from rbac.services.service_accounts import create_key, create_service_account
from tests.admin.test_admin import post_change, saved
from tests.conftest import ApiClient, err
from tests.factories import RoleFactory, WorkspaceFactory

AUTH = "Authentication required or invalid credentials."


def test_creating_a_service_account_in_the_admin(admin_web):
    workspace = WorkspaceFactory()
    role = RoleFactory(workspace=workspace, permissions=["projects:list"])
    response = admin_web.post(
        reverse("admin:rbac_serviceaccount_add"),
        {
            "workspace": str(workspace.pk),
            "name": "ci",
            "enabled": "on",
            "roles": [str(role.pk)],
            "tags": "[]",
            "meta": '{"schema_version": "1"}',
        },
    )
    saved(response)
    service_account = ServiceAccount.objects.get(name="ci")
    assert list(service_account.roles.all()) == [role]
    assert admin_web.get(reverse("admin:rbac_serviceaccount_changelist")).status_code == 200
    assert (
        admin_web.get(reverse("admin:rbac_serviceaccount_change", args=[service_account.pk])).status_code
        == 200
    )


def test_disabling_in_the_admin_refuses_its_keys_at_once(admin_web):
    workspace = WorkspaceFactory()
    service_account = create_service_account(
        workspace, name="ci", roles=[], tags=[], meta={"schema_version": "1"}, actor=None
    )
    _, raw = create_key(service_account, name="k", actor=None)
    keyed = ApiClient(raw)
    assert keyed.call("/roles/list", {}).status_code == 403  # authenticated; holds no permission
    saved(post_change(admin_web, service_account, enabled=""))
    err(keyed.call("/roles/list", {}), 401, AUTH)
    assert Event.objects.filter(payload__type="service_account.updated").exists()


def test_revoking_every_key_in_the_admin(admin_web):
    workspace = WorkspaceFactory()
    service_account = create_service_account(
        workspace, name="ci", roles=[], tags=[], meta={"schema_version": "1"}, actor=None
    )
    _, raw = create_key(service_account, name="k", actor=None)
    response = admin_web.post(
        reverse("admin:rbac_serviceaccount_changelist"),
        {"action": "revoke_every_key", "_selected_action": [str(service_account.pk)]},
    )
    assert response.status_code == 302
    assert ServiceAccountKey.objects.get().revoked_at is not None
    err(ApiClient(raw).call("/roles/list", {}), 401, AUTH)
