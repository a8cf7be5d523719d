# The table of exact row counts kept by PostgreSQL triggers (iam.counts); nothing on SQLite.

from django.db import migrations

from iam import counts


class Migration(migrations.Migration):
    dependencies = [
        ("iam", "0003_audit_entry"),
    ]

    operations = [counts.on_postgresql(counts.CREATE_TABLE_SQL, counts.DROP_TABLE_SQL)]
