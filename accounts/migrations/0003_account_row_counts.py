# Exact counts of accounts, whole and per `verified` and `enabled` (iam.counts); nothing on SQLite.

from django.db import migrations

from iam import counts

COUNTED = counts.Counted(tenant=None, fields=("verified", "enabled"))


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(counts.install_sql("accounts_account", COUNTED), params=None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(counts.uninstall_sql("accounts_account"), params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_list_indexes"),
        ("iam", "0004_row_counts"),
    ]

    operations = [migrations.RunPython(install, uninstall)]
