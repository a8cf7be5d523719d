# Exact counts of memberships per workspace, whole and per `status` and `scope` (iam.platform.counts);
# nothing on SQLite.
# The SQL is frozen here as it was written (iam/platform/counts.py may change; a migration never does).

from django.db import migrations

INSTALL = """CREATE OR REPLACE FUNCTION iam_count_rbac_membership() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_advisory_xact_lock(29661994935283575);
        DELETE FROM iam_row_count WHERE table_name = 'rbac_membership';
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO iam_row_count (table_name, tenant, field, value, n)
        SELECT 'rbac_membership', d.tenant, k.field, k.value, sum(d.delta)
        FROM (SELECT 1 AS delta, workspace_id::text AS tenant, r.status, r.scope FROM new_rows AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('status', d.status::text), ('scope', d.scope::text)) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO iam_row_count (table_name, tenant, field, value, n)
        SELECT 'rbac_membership', d.tenant, k.field, k.value, sum(d.delta)
        FROM (SELECT -1 AS delta, workspace_id::text AS tenant, r.status, r.scope FROM old_rows AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('status', d.status::text), ('scope', d.scope::text)) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;
    ELSE
        INSERT INTO iam_row_count (table_name, tenant, field, value, n)
        SELECT 'rbac_membership', d.tenant, k.field, k.value, sum(d.delta)
        FROM (SELECT 1 AS delta, workspace_id::text AS tenant, r.status, r.scope FROM new_rows AS r UNION ALL SELECT -1 AS delta, workspace_id::text AS tenant, r.status, r.scope FROM old_rows AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('status', d.status::text), ('scope', d.scope::text)) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;
    END IF;
    RETURN NULL;
END;
$body$;

CREATE TRIGGER iam_count_insert AFTER INSERT ON rbac_membership REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION iam_count_rbac_membership();
CREATE TRIGGER iam_count_update AFTER UPDATE ON rbac_membership REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION iam_count_rbac_membership();
CREATE TRIGGER iam_count_delete AFTER DELETE ON rbac_membership REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION iam_count_rbac_membership();
CREATE TRIGGER iam_count_truncate AFTER TRUNCATE ON rbac_membership  FOR EACH STATEMENT EXECUTE FUNCTION iam_count_rbac_membership();
LOCK TABLE rbac_membership IN SHARE ROW EXCLUSIVE MODE;
SELECT pg_advisory_xact_lock(29661994935283575);
DELETE FROM iam_row_count WHERE table_name = 'rbac_membership';
INSERT INTO iam_row_count (table_name, tenant, field, value, n)
SELECT 'rbac_membership', d.tenant, k.field, k.value, count(*)
FROM (SELECT 1 AS delta, workspace_id::text AS tenant, r.status, r.scope FROM rbac_membership AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('status', d.status::text), ('scope', d.scope::text)) AS k (field, value)
GROUP BY d.tenant, k.field, k.value;
"""
UNINSTALL = """DROP FUNCTION iam_count_rbac_membership() CASCADE;
DELETE FROM iam_row_count WHERE table_name = 'rbac_membership';"""


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
        ("rbac", "0003_list_indexes"),
        ("iam", "0004_row_counts"),
    ]

    operations = [on_postgresql(INSTALL, UNINSTALL)]
