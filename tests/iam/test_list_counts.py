"""Exact totals from the database's counts (iam.platform.counts, docs/performance.md): the triggers keep the
counts equal to count(*) through every kind of write, and a list reads them exactly when they hold its
total."""

from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction

from accounts.models import Account
from iam.celery import app
from iam.platform import counts
from rbac.models import Membership
from tenancy.models import Workspace
from tests.conftest import client_for, ok
from tests.factories import AccountFactory, MembershipFactory, ProjectFactory, RoleFactory, WorkspaceFactory

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the counts are PostgreSQL's (SQLite always counts rows)"
)


def stored() -> dict[tuple, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, tenant, field, value, sum(n) FROM iam_row_count "
            "GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0"
        )
        return {tuple(row[:4]): row[4] for row in cursor.fetchall()}


def actual() -> dict[tuple, int]:
    """What the counts must say, counted from the rows themselves."""
    found = {}
    with connection.cursor() as cursor:
        for table, counted in counts.COUNTED.items():
            tenant = "''" if counted.tenant is None else f"{counted.tenant}::text"
            for field in ("", *counted.fields):
                value = f"{field}::text" if field else "''"
                cursor.execute(f"SELECT {tenant}, {value}, count(*) FROM {table} GROUP BY 1, 2")
                found.update({(table, tenant_, field, value_): n for tenant_, value_, n in cursor.fetchall()})
    return found


def assert_exact() -> None:
    assert stored() == actual()


def test_the_installed_triggers_count_what_counted_declares(db):
    """A change to COUNTED needs a migration that installs it: the functions in the database match."""
    with connection.cursor() as cursor:
        for table, counted in counts.COUNTED.items():
            cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = %s", [f"iam_count_{table}"])
            assert cursor.fetchone() == (counts.function_body(table, counted),)
            cursor.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname LIKE 'iam_count_%%'",
                [table],
            )
            assert cursor.fetchone() == (4,)


def test_counts_follow_inserts_updates_and_deletes(workspace):
    memberships = [MembershipFactory(workspace=workspace, status="invited") for _ in range(3)]
    MembershipFactory(workspace=workspace)
    assert stored()[("rbac_membership", str(workspace.pk), "status", "invited")] == 3
    assert_exact()

    memberships[0].status = "active"
    memberships[0].save()  # a status change moves the count from one value to the other
    Membership.objects.filter(pk=memberships[1].pk).update(status="suspended", scope="workspace")
    Account.objects.filter(pk=memberships[2].account_id).update(name="renamed")  # changes no count
    assert stored()[("rbac_membership", str(workspace.pk), "status", "invited")] == 1
    assert_exact()

    memberships[2].delete()
    Membership.objects.filter(pk=memberships[1].pk).delete()
    assert_exact()


def test_a_membership_moved_to_another_workspace_moves_its_count(workspace):
    other = WorkspaceFactory()
    membership = MembershipFactory(workspace=workspace)
    Membership.objects.filter(pk=membership.pk).update(workspace=other)
    assert ("rbac_membership", str(workspace.pk), "", "") not in stored()
    assert_exact()


def test_bulk_operations_are_counted(workspace):
    accounts = Account.objects.bulk_create(
        [Account(email=f"bulk{n}@example.com", name=f"Bulk {n}", verified=n % 2 == 0) for n in range(50)]
    )
    Membership.objects.bulk_create(
        [
            Membership(account=account, workspace=workspace, scope="workspace", status="active")
            for account in accounts
        ]
    )
    assert_exact()
    Membership.objects.filter(workspace=workspace, account__verified=True).update(status="suspended")
    Account.objects.filter(email__startswith="bulk").update(enabled=False)
    assert_exact()
    Membership.objects.filter(workspace=workspace, status="active").delete()
    assert_exact()


def test_cascade_deletes_are_counted(workspace):
    project = ProjectFactory(workspace=workspace)
    doomed = AccountFactory()
    MembershipFactory(account=doomed, workspace=workspace)
    MembershipFactory(account=doomed, workspace=workspace, project=project, scope="project")
    MembershipFactory(workspace=workspace)
    other = WorkspaceFactory()
    MembershipFactory(workspace=other, status="suspended")
    assert_exact()

    doomed.delete()  # its memberships go with it
    assert stored()[("rbac_membership", str(workspace.pk), "", "")] == 1
    assert_exact()
    Workspace.objects.filter(pk=other.pk).delete()  # and a workspace's with it
    assert ("rbac_membership", str(other.pk), "", "") not in stored()
    assert_exact()


def test_a_rolled_back_transaction_leaves_the_counts_as_they_were(workspace):
    MembershipFactory(workspace=workspace)
    before = stored()

    def fail() -> None:
        with transaction.atomic():
            MembershipFactory.create_batch(3, workspace=workspace)
            Membership.objects.filter(workspace=workspace).update(status="suspended")
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        fail()
    assert stored() == before
    assert_exact()


def test_truncate_empties_the_counts(workspace):
    MembershipFactory.create_batch(2, workspace=workspace)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the inserts' deferred checks, before TRUNCATE
        cursor.execute("TRUNCATE rbac_membership CASCADE")
    assert not [key for key in stored() if key[0] == "rbac_membership"]
    assert_exact()


def test_a_recount_restores_counts_written_around_the_triggers(workspace):
    MembershipFactory.create_batch(2, workspace=workspace)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE iam_row_count SET n = n + 7")
        cursor.execute(counts.recount_sql("rbac_membership", counts.COUNTED["rbac_membership"]))
        cursor.execute(counts.recount_sql("accounts_account", counts.COUNTED["accounts_account"]))
    assert_exact()


def rows_per_key() -> dict[tuple, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, tenant, field, value, count(*) FROM iam_row_count GROUP BY 1, 2, 3, 4"
        )
        return {tuple(row[:4]): row[4] for row in cursor.fetchall()}


def test_writers_only_add_rows_and_compaction_folds_each_key_into_one(workspace):
    """No trigger updates a row (no writer waits on another's counter row); compaction sums each key's
    rows into one, drops the keys that sum to 0, and keeps every count exact."""
    other = WorkspaceFactory()
    memberships = MembershipFactory.create_batch(3, workspace=workspace, status="invited")
    MembershipFactory(workspace=other)
    Membership.objects.filter(pk=memberships[0].pk).update(status="active")
    Membership.objects.filter(workspace=other).delete()  # its keys sum to 0
    before = rows_per_key()
    assert before[("rbac_membership", str(workspace.pk), "", "")] == 3  # one delta row per statement
    assert before[("rbac_membership", str(other.pk), "", "")] == 2
    exact = actual()

    assert counts.compact() == sum(before.values()) - len(exact)
    assert rows_per_key() == dict.fromkeys(exact, 1)  # one row per key, none for a key that sums to 0
    assert stored() == exact
    assert counts.compact() == 0  # nothing left to fold
    Membership.objects.filter(pk=memberships[1].pk).delete()
    assert_exact()
    assert rows_per_key()[("rbac_membership", str(workspace.pk), "", "")] == 2


def test_concurrent_writers_of_one_count_never_wait_on_each_other(db):
    """17 open transactions each add an account (the same counts: all, `verified`, `enabled`); none waits
    on a lock another holds. (With 16 shards of upserted counter rows two of them shared a row, and the
    later one waited until the earlier one ended: here it would time out.)"""
    insert = (
        "INSERT INTO accounts_account (id, email, name, password, tags, meta, created_at, enabled, verified, "
        "is_superuser, session_version) VALUES (gen_random_uuid(), gen_random_uuid() || '@example.com', "
        "'w', '', '[]', '{}', now(), true, false, false, 0)"
    )
    writers = [psycopg.connect(**connection.get_connection_params()) for _ in range(17)]
    try:
        for writer in writers:
            writer.execute("SET lock_timeout = '2s'")
            writer.execute(insert)  # LockNotAvailable if it had to wait
    finally:
        for writer in writers:
            writer.rollback()
            writer.close()


def test_compaction_skips_while_another_runs(workspace):
    MembershipFactory.create_batch(2, workspace=workspace)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [counts.LOCK])  # as a compaction in progress holds it
        assert counts.compact() is None
        other.execute("SELECT pg_advisory_unlock(%s)", [counts.LOCK])
    assert counts.compact() > 0
    assert_exact()


def test_cleanup_and_the_beat_schedule_compact(workspace, settings):
    MembershipFactory.create_batch(3, workspace=workspace)
    before = rows_per_key()
    out = StringIO()
    call_command("cleanup", stdout=out)
    assert f"deleted {sum(before.values()) - len(before)} row count rows (folded)" in out.getvalue()
    assert set(rows_per_key().values()) == {1}
    assert_exact()
    task = settings.CELERY_BEAT_SCHEDULE["compact-row-counts"]["task"]
    app.loader.import_default_modules()
    assert task in app.tasks


def test_tenant_of_names_only_a_whole_counted_set(workspace):
    other = WorkspaceFactory()
    mine = Membership.objects.filter(workspace=workspace)
    assert counts.tenant_of(Account.objects.all()) == ""
    assert counts.tenant_of(Account.objects.all(), workspace.pk) == ""  # counted whole, whoever lists
    assert counts.tenant_of(Account.objects.filter(enabled=True)) is None
    assert counts.tenant_of(Account.objects.filter(memberships__workspace=workspace), workspace.pk) is None
    assert counts.tenant_of(mine, workspace.pk) == str(workspace.pk)
    assert counts.tenant_of(Membership.objects.filter(workspace_id=str(workspace.pk)), workspace.pk) == str(
        workspace.pk
    )
    assert counts.tenant_of(mine) is None  # a workspace's rows, but the list names no workspace
    assert counts.tenant_of(mine, other.pk) is None  # not the rows of the workspace the list names
    assert counts.tenant_of(Membership.objects.all(), workspace.pk) is None  # counted per workspace only
    assert counts.tenant_of(mine.filter(project_id__in=[]), workspace.pk) is None
    assert counts.tenant_of(mine.filter(status="active"), workspace.pk) is None
    assert counts.tenant_of(Membership.objects.exclude(workspace=workspace), workspace.pk) is None
    assert counts.tenant_of(mine | Membership.objects.filter(workspace=other), workspace.pk) is None
    assert counts.tenant_of(mine.union(Membership.objects.filter(workspace=other)), workspace.pk) is None
    assert counts.tenant_of(mine.select_related("account"), workspace.pk) is None
    assert counts.tenant_of(mine[:5], workspace.pk) is None
    assert counts.tenant_of(Workspace.objects.all()) is None  # not counted


def test_total_answers_only_what_one_count_holds(workspace):
    membership = MembershipFactory(workspace=workspace, status="invited")
    scoped = Membership.objects.filter(workspace=workspace)
    ws = workspace.pk
    assert counts.total(scoped, []) is None  # the list names no workspace
    assert counts.total(scoped, [], workspace_id=ws) == 1
    assert counts.total(scoped, [("status", "invited")], workspace_id=ws) == 1
    assert counts.total(scoped, [("status", "active")], workspace_id=ws) == 0
    assert counts.total(scoped, [("status", "invited"), ("status", "active")], workspace_id=ws) is None
    assert counts.total(scoped, [("status", "invited"), ("scope", "workspace")], workspace_id=ws) is None
    assert counts.total(scoped, [("account_id", membership.account_id)], workspace_id=ws) is None
    assert counts.total(scoped.filter(status="invited"), [], workspace_id=ws) is None
    verified = Account.objects.filter(verified=True).count()
    assert counts.total(Account.objects.all(), [("verified", True)]) == verified


def skew_counts(by: int) -> None:
    """Adds `by` to every stored count (in a delta row of its own): a total that moves with it was read from
    the counts, one that does not was counted from the rows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO iam_row_count (table_name, tenant, field, value, n) "
            "SELECT table_name, tenant, field, value, %s FROM iam_row_count GROUP BY 1, 2, 3, 4",
            [by],
        )


def total(api, path: str, body: dict) -> int:
    return ok(api.call(path, body))["metadata"]["total"]


def test_lists_read_their_total_from_the_counts_where_the_counts_hold_it(workspace, member_of):
    _, admin = member_of(workspace, "memberships:list")
    project = ProjectFactory(workspace=workspace)
    MembershipFactory(workspace=workspace, status="invited")
    MembershipFactory(workspace=workspace, project=project, scope="project", status="invited")
    operator = client_for(AccountFactory(is_superuser=True))
    AccountFactory(verified=False)
    unverified = Account.objects.filter(verified=False).count()
    counted = [
        (admin, "/memberships/list", {}, 3),
        (admin, "/memberships/list", {"filter": {"fields": {"status": "invited"}}}, 2),
        (admin, "/memberships/list", {"filter": {"fields": {"scope": "project"}}}, 1),
        (operator, "/accounts/list", {}, Account.objects.count()),
        (operator, "/accounts/list", {"filter": {"fields": {"verified": False}}}, unverified),
    ]
    rows = [
        (admin, "/memberships/list", {"filter": {"fields": {"status": "invited", "scope": "project"}}}, 1),
        (admin, "/memberships/list", {"filter": {"fields": {"project_id": str(project.pk)}}}, 1),
        (admin, "/memberships/list", {"filter": {"tags": ["x"]}}, 0),
        (admin, "/memberships/list", {"filter": {"fields": {"project_id": None}}}, 2),
        (operator, "/accounts/list", {"filter": {"fields": {"name": "nobody"}}}, 0),
    ]
    for api, path, body, expected in counted + rows:
        assert total(api, path, body) == expected, body
    skew_counts(1000)
    for api, path, body, expected in counted:
        assert total(api, path, body) == expected + 1000, body
    for api, path, body, expected in rows:
        assert total(api, path, body) == expected, body


def test_a_list_narrowed_to_some_projects_counts_its_rows(workspace):
    mine = ProjectFactory(workspace=workspace)
    role = RoleFactory(workspace=workspace, permissions=["memberships:list"])
    lead = MembershipFactory(workspace=workspace, project=mine, scope="project", roles=[role])
    MembershipFactory.create_batch(2, workspace=workspace)
    skew_counts(1000)
    assert total(client_for(lead.account, workspace), "/memberships/list", {}) == 1
