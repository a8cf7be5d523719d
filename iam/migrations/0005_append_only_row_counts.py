# The row counts become append-only (iam.platform.counts): the triggers insert delta rows instead of upserting
# a shared counter row, whose lock a writer held until commit (writers of one key queued, and two writers
# touching accounts and memberships in opposite orders could deadlock). Rebuilds the table with each key's
# sum and replaces both trigger functions; nothing on SQLite. A fresh database already gets this design
# from the earlier migrations (their frozen SQL installs it too), and the rebuild leaves it as it is.

# The SQL is frozen here as it was written (iam/platform/counts.py may change; a migration never does).

from django.db import migrations

CONVERT = """LOCK TABLE accounts_account, rbac_membership IN SHARE ROW EXCLUSIVE MODE;

CREATE TEMPORARY TABLE iam_row_count_sums ON COMMIT DROP AS
SELECT table_name, tenant, field, value, sum(n)::bigint AS n FROM iam_row_count
GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0;
DROP TABLE iam_row_count;

CREATE TABLE iam_row_count (
    table_name text NOT NULL,
    tenant text NOT NULL,
    field text NOT NULL,
    value text NOT NULL,
    n bigint NOT NULL,
    id bigserial PRIMARY KEY
);
CREATE INDEX iam_row_count_key ON iam_row_count (table_name, tenant, field, value) INCLUDE (n);

INSERT INTO iam_row_count (table_name, tenant, field, value, n) SELECT * FROM iam_row_count_sums;
DROP TABLE iam_row_count_sums;

CREATE OR REPLACE FUNCTION iam_count_accounts_account() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_advisory_xact_lock(29661994935283575);
        DELETE FROM iam_row_count WHERE table_name = 'accounts_account';
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO iam_row_count (table_name, tenant, field, value, n)
        SELECT 'accounts_account', d.tenant, k.field, k.value, sum(d.delta)
        FROM (SELECT 1 AS delta, '' AS tenant, r.verified, r.enabled FROM new_rows AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('verified', d.verified::text), ('enabled', d.enabled::text)) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO iam_row_count (table_name, tenant, field, value, n)
        SELECT 'accounts_account', d.tenant, k.field, k.value, sum(d.delta)
        FROM (SELECT -1 AS delta, '' AS tenant, r.verified, r.enabled FROM old_rows AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('verified', d.verified::text), ('enabled', d.enabled::text)) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;
    ELSE
        INSERT INTO iam_row_count (table_name, tenant, field, value, n)
        SELECT 'accounts_account', d.tenant, k.field, k.value, sum(d.delta)
        FROM (SELECT 1 AS delta, '' AS tenant, r.verified, r.enabled FROM new_rows AS r UNION ALL SELECT -1 AS delta, '' AS tenant, r.verified, r.enabled FROM old_rows AS r) AS d CROSS JOIN LATERAL (VALUES ('', ''), ('verified', d.verified::text), ('enabled', d.enabled::text)) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;
    END IF;
    RETURN NULL;
END;
$body$;

CREATE OR REPLACE FUNCTION iam_count_rbac_membership() RETURNS trigger LANGUAGE plpgsql AS $body$
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
"""


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
        ("iam", "0004_row_counts"),
        ("accounts", "0003_account_row_counts"),
        ("rbac", "0004_membership_row_counts"),
    ]

    # Backwards it stays: the earlier migrations install this design too.
    operations = [on_postgresql(CONVERT, "")]
