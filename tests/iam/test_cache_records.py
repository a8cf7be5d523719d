"""The cache holds narrow plain records: the fields the checks read, never a password hash, an encrypted
secret or a workspace's configuration."""

from django.core.cache import cache as django_cache

from accounts.account_cache import account_key
from clients.client_cache import client_key
from clients.models import Client
from tenancy.workspace_cache import _key as workspace_key
from tests.conftest import ApiClient, ok, token_for
from tests.factories import WorkspaceFactory


def test_workspace_and_client_entries_are_plain_tuples_without_secrets(db, member_of):
    workspace = WorkspaceFactory(config={"schema_version": "1", "private": "not cached"})
    account, api = member_of(workspace, "clients:*")
    created = ok(api.call("/clients/create", {"name": "svc", "tags": [], "meta": {"schema_version": "1"}}))
    body = {"client_id": created["id"], "client_secret": created["secret"], "token": token_for(account)}
    assert ok(ApiClient().call("/clients/validate", body))["authorized"] is True

    cached_workspace = django_cache.get(workspace_key(str(workspace.pk)))
    assert cached_workspace == (workspace.pk, workspace.name, workspace.slug, False)  # mfa_required
    row = Client.objects.get(pk=created["id"])
    cached_client = django_cache.get(client_key(created["id"]))
    assert type(cached_client) is tuple
    assert cached_client == (str(workspace.pk), row.secret_digest, row.secret_version)
    cached_account = django_cache.get(account_key(account.pk))
    assert type(cached_account) is tuple
    assert account.password not in cached_account
    assert row.secret_encrypted not in cached_client
