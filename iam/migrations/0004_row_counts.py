# The table of exact row counts kept by PostgreSQL triggers (iam.counts); nothing on SQLite.

from django.db import migrations

from iam import counts


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(counts.CREATE_TABLE_SQL, params=None)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(counts.DROP_TABLE_SQL, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("iam", "0003_audit_entry"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
