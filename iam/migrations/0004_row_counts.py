# The table of exact row counts kept by PostgreSQL triggers (iam.platform.counts); nothing on SQLite.
# The SQL is frozen here as it was written (iam/platform/counts.py may change; a migration never does).

from django.db import migrations

CREATE = """
CREATE TABLE iam_row_count (
    table_name text NOT NULL,
    tenant text NOT NULL,
    field text NOT NULL,
    value text NOT NULL,
    n bigint NOT NULL,
    id bigserial PRIMARY KEY
);
CREATE INDEX iam_row_count_key ON iam_row_count (table_name, tenant, field, value) INCLUDE (n);
"""
DROP = """DROP TABLE iam_row_count;"""


def on_postgresql(sql: str, reverse_sql: str) -> migrations.RunPython:
    """Runs `sql` on PostgreSQL and nothing elsewhere (SQLite counts rows with count(*))."""

    def run(statements: str):
        def operation(apps, schema_editor) -> None:
            if statements and schema_editor.connection.vendor == "postgresql":
                schema_editor.execute(statements, params=None)  # params=None: `%` is SQL's modulo here

        return operation

    return migrations.RunPython(run(sql), run(reverse_sql))


class Migration(migrations.Migration):
    dependencies = [
        ("iam", "0003_audit_entry"),
    ]

    operations = [on_postgresql(CREATE, DROP)]
