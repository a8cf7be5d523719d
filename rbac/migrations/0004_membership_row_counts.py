# Exact counts of memberships per workspace, whole and per `status` and `scope` (iam.counts);
# nothing on SQLite.

from django.db import migrations

from iam import counts

COUNTED = counts.Counted(tenant="workspace_id", fields=("status", "scope"))


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(counts.install_sql("rbac_membership", COUNTED), params=None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(counts.uninstall_sql("rbac_membership"), params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("rbac", "0003_list_indexes"),
        ("iam", "0004_row_counts"),
    ]

    operations = [migrations.RunPython(install, uninstall)]
