# Exact counts of memberships per workspace, whole and per `status` and `scope` (iam.counts);
# nothing on SQLite.

from django.db import migrations

from iam import counts

COUNTED = counts.Counted(tenant="workspace_id", fields=("status", "scope"))


class Migration(migrations.Migration):
    dependencies = [
        ("rbac", "0003_list_indexes"),
        ("iam", "0004_row_counts"),
    ]

    operations = [
        counts.on_postgresql(counts.install_sql("rbac_membership", COUNTED), counts.uninstall_sql("rbac_membership"))
    ]
