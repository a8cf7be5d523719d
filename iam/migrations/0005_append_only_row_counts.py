# The row counts become append-only (iam.counts): the triggers insert delta rows instead of upserting a
# shared counter row, whose lock a writer held until commit (writers of one key queued, and two writers
# touching accounts and memberships in opposite orders could deadlock). Rebuilds the table with each key's
# sum and replaces both trigger functions; nothing on SQLite. A fresh database already gets this design
# from the earlier migrations (they call the same iam.counts), and the rebuild leaves it as it is.

from django.db import migrations

from iam import counts

ACCOUNTS = counts.Counted(tenant=None, fields=("verified", "enabled"))
MEMBERSHIPS = counts.Counted(tenant="workspace_id", fields=("status", "scope"))

CONVERT = "\n".join(
    [
        # No trigger adds a row while the table is rebuilt: writers of the counted tables wait, then run
        # the new functions.
        "LOCK TABLE accounts_account, rbac_membership IN SHARE ROW EXCLUSIVE MODE;",
        counts.REBUILD_TABLE_SQL,
        counts.function_sql("accounts_account", ACCOUNTS),
        counts.function_sql("rbac_membership", MEMBERSHIPS),
    ]
)


class Migration(migrations.Migration):
    dependencies = [
        ("iam", "0004_row_counts"),
        ("accounts", "0003_account_row_counts"),
        ("rbac", "0004_membership_row_counts"),
    ]

    # Backwards it stays: the earlier migrations' code installs this design too.
    operations = [counts.on_postgresql(CONVERT, "")]
