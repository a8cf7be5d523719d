"""Credentials that a tenant held are moved to the root workspace by a data migration."""

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


@pytest.mark.django_db(transaction=True)
def test_one_current_signing_key_per_algorithm_keeps_the_newest():
    """Two processes that raced before the constraint may have left two current keys of one algorithm:
    the migration retires the older (it stays published until its tokens expire), then adds the
    constraint that makes the race end with one key."""
    import datetime as dt

    before, after = [("authn", "0009_session_sso_workspace")], [("authn", "0010_one_current_signing_key")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    SigningKey = executor.loader.project_state(before).apps.get_model("authn", "SigningKey")
    now = dt.datetime.now(dt.UTC)

    def key(kid, algorithm, age, retired=False):
        SigningKey.objects.create(
            kid=kid,
            algorithm=algorithm,
            public_key="-",
            private_key_encrypted="-",
            retired_at=now if retired else None,
        )
        SigningKey.objects.filter(kid=kid).update(created_at=now - dt.timedelta(minutes=age))

    key("older", "EdDSA", 2)
    key("newer", "EdDSA", 1)
    key("alone", "ES256", 3)
    key("retired", "ES256", 9, retired=True)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    SigningKey = executor.loader.project_state(after).apps.get_model("authn", "SigningKey")
    current = set(SigningKey.objects.filter(retired_at__isnull=True).values_list("kid", flat=True))
    assert current == {"newer", "alone"}
    assert SigningKey.objects.count() == 4
    SigningKey.objects.all().delete()

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # leave the database as the other tests expect
