"""Issue 11 item 1: credentials that a tenant held are moved to the root workspace by a data migration."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("authn", "0002_oauth_state"), ("tenancy", "0001_initial"), ("accounts", "0001_initial")]
AFTER = [("authn", "0003_credentials_in_root_workspace")]


@pytest.mark.django_db(transaction=True)
def test_credentials_of_every_workspace_move_to_the_root_workspace(settings):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Account = old.get_model("accounts", "Account")
    Workspace = old.get_model("tenancy", "Workspace")
    Credential = old.get_model("authn", "Credential")
    tenant = Workspace.objects.create(name="Tenant", slug="tenant", config={"schema_version": "1"})
    victim = Account.objects.create(email="victim@example.com", name="Victim", password="!")
    held = Credential.objects.create(
        account=victim, workspace=tenant, kind="password", provider="local", status="active"
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    moved = new.get_model("authn", "Credential").objects.get(pk=held.pk)
    root = new.get_model("tenancy", "Workspace").objects.get(slug=settings.IAM_ROOT_WORKSPACE)
    assert moved.workspace_id == root.pk

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # leave the database as the other tests expect
