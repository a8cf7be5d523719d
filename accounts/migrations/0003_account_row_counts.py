# Exact counts of accounts, whole and per `verified` and `enabled` (iam.counts); nothing on SQLite.

from django.db import migrations

from iam import counts

COUNTED = counts.Counted(tenant=None, fields=("verified", "enabled"))


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_list_indexes"),
        ("iam", "0004_row_counts"),
    ]

    operations = [
        counts.on_postgresql(
            counts.install_sql("accounts_account", COUNTED), counts.uninstall_sql("accounts_account")
        )
    ]
