"""Exact row counts kept by PostgreSQL (docs/performance.md: a list's `total` over a million rows,
docs/api.md#lists allows no estimate).

A counted table carries statement-level triggers (with transition tables) on INSERT, UPDATE, DELETE and
TRUNCATE that record each statement's change in `iam_row_count`: per tenant (a workspace, or `''` for a
table counted whole) a delta for all its rows (`field` `''`) and one per value of each counted field. The
counts are append-only: a trigger only INSERTs new delta rows, never updates one, so no writer ever waits
on a counter row (an upsert of a shared row would hold its lock until commit: writers of one key would
queue, and two transactions touching two counted tables in opposite orders could deadlock). A read sums
the key's rows (`sum(n)`, an index-only scan). `compact` (Celery beat every minute, and `manage.py
cleanup`) folds each key's rows into one in a single statement, so a reader in any snapshot sees the same
sums before and after; its deletes lock only rows no trigger touches. The triggers run inside the writing
statement, so a count is exact in every snapshot: it commits or rolls back with the rows. Django's cascades
are plain DELETEs, and the database's own cascades run statements too: both pass through the triggers.

`COUNTED` says which tables are counted and how. The migrations hold the SQL frozen as it was written
(the output of `install_sql` for a table's counts; `iam/0005_append_only_row_counts` replaced the
functions of an earlier, sharded design), and tests/iam/test_list_counts.py checks that the installed
functions match `COUNTED`: a change here is a new migration that freezes the new SQL.
SQLite (development) has no counts: `total` there is always `count(*)`.
"""

import functools
import uuid
from dataclasses import dataclass

from django.core.exceptions import EmptyResultSet
from django.db import connections, transaction
from django.db.models import Model, QuerySet

TABLE = "iam_row_count"  # the SQL below is built from these constants and COUNTED's, never from input
# The transaction-level advisory lock that compaction, a recount and a TRUNCATE's trigger take: one
# compaction at a time (another skips), and none of them deletes a row another is deleting.
LOCK = 0x69616D5F726F77  # "iam_row"


@dataclass(frozen=True)
class Counted:
    tenant: str | None  # the column a list is scoped by (counts per tenant); None: counted whole
    fields: tuple[str, ...]  # NOT NULL columns of text or boolean type, counted per value


COUNTED: dict[str, Counted] = {
    "accounts_account": Counted(tenant=None, fields=("verified", "enabled")),
    "rbac_membership": Counted(tenant="workspace_id", fields=("status", "scope")),
}


def _keys(counted: Counted) -> str:
    """The (field, value) pairs one row counts under: all rows, then each counted field's value."""
    pairs = ["('', '')"] + [f"('{field}', d.{field}::text)" for field in counted.fields]
    return ", ".join(pairs)


def _changes(counted: Counted, sign: int, rows: str) -> str:
    tenant = "''" if counted.tenant is None else f"{counted.tenant}::text"
    columns = ", ".join(f"r.{field}" for field in counted.fields)
    return f"SELECT {sign} AS delta, {tenant} AS tenant, {columns} FROM {rows} AS r"  # noqa: S608


def _add(table: str, counted: Counted, changes: str) -> str:
    # New rows only: an INSERT waits on no lock another transaction holds (no shared row, no conflict).
    return f"""
        INSERT INTO {TABLE} (table_name, tenant, field, value, n)
        SELECT '{table}', d.tenant, k.field, k.value, sum(d.delta)
        FROM ({changes}) AS d CROSS JOIN LATERAL (VALUES {_keys(counted)}) AS k (field, value)
        GROUP BY d.tenant, k.field, k.value
        HAVING sum(d.delta) <> 0;"""  # noqa: S608


def function_body(table: str, counted: Counted) -> str:
    inserted = _changes(counted, 1, "new_rows")
    deleted = _changes(counted, -1, "old_rows")
    return f"""
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_advisory_xact_lock({LOCK});
        DELETE FROM {TABLE} WHERE table_name = '{table}';
    ELSIF TG_OP = 'INSERT' THEN{_add(table, counted, inserted)}
    ELSIF TG_OP = 'DELETE' THEN{_add(table, counted, deleted)}
    ELSE{_add(table, counted, f"{inserted} UNION ALL {deleted}")}
    END IF;
    RETURN NULL;
END;
"""  # noqa: S608


def recount_sql(table: str, counted: Counted) -> str:
    """Counts the table afresh: after a load that bypassed the triggers (bench/seed.sql) or at install."""
    changes = _changes(counted, 1, table)
    return f"""
LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE;
SELECT pg_advisory_xact_lock({LOCK});
DELETE FROM {TABLE} WHERE table_name = '{table}';
INSERT INTO {TABLE} (table_name, tenant, field, value, n)
SELECT '{table}', d.tenant, k.field, k.value, count(*)
FROM ({changes}) AS d CROSS JOIN LATERAL (VALUES {_keys(counted)}) AS k (field, value)
GROUP BY d.tenant, k.field, k.value;
"""  # noqa: S608


def function_sql(table: str, counted: Counted) -> str:
    """Creates or replaces the trigger function that counts the table's changes."""
    function = f"iam_count_{table}"
    return (
        f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $body${function_body(table, counted)}$body$;\n"
    )


def install_sql(table: str, counted: Counted) -> str:
    function = f"iam_count_{table}"
    triggers = [
        ("insert", "INSERT", "REFERENCING NEW TABLE AS new_rows"),
        ("update", "UPDATE", "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        ("delete", "DELETE", "REFERENCING OLD TABLE AS old_rows"),
        ("truncate", "TRUNCATE", ""),
    ]
    statements = [function_sql(table, counted)]
    statements += [
        f"CREATE TRIGGER iam_count_{name} AFTER {event} ON {table} {referencing} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}();"
        for name, event, referencing in triggers
    ]
    return "\n".join(statements) + recount_sql(table, counted)


# One statement: a reader sees every key's rows before it or its one row after it, the same sum. Only the
# keys with more than one row; the rows a concurrent writer inserts are not in its snapshot and stay.
COMPACT_SQL = f"""
WITH keys AS (
    SELECT table_name, tenant, field, value FROM {TABLE} GROUP BY 1, 2, 3, 4 HAVING count(*) > 1
), gone AS (
    DELETE FROM {TABLE} AS c USING keys AS k
    WHERE (c.table_name, c.tenant, c.field, c.value) = (k.table_name, k.tenant, k.field, k.value)
    RETURNING c.table_name, c.tenant, c.field, c.value, c.n
), folded AS (
    INSERT INTO {TABLE} (table_name, tenant, field, value, n)
    SELECT table_name, tenant, field, value, sum(n) FROM gone GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM folded);
"""  # noqa: S608


def compact(using: str = "default") -> int | None:
    """Folds each key's rows into one and returns how many rows fewer the table holds; None when another
    compaction is running (it does the same) or the database has no counts (SQLite)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [LOCK])
        if not cursor.fetchone()[0]:
            return None
        cursor.execute(COMPACT_SQL)
        return int(cursor.fetchone()[0])


def tenant_of(queryset: QuerySet, workspace_id: object = None) -> str | None:
    """The count that holds exactly the queryset's rows: `''` for a table counted whole, the workspace's id
    for a table counted per workspace when the queryset is that workspace's rows; None for anything else
    (any other condition, a join, a slice, a union), so a list cannot read a count that is not its own.
    The queryset is compared, as the SQL it runs, with the counted set itself (`_counted_sql`)."""
    counted = COUNTED.get(queryset.model._meta.db_table)
    if counted is None or (counted.tenant is not None and workspace_id is None):
        return None
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:  # `filter(project_id__in=[])`: Django runs no query for it
        return None
    key = "" if counted.tenant is None else str(workspace_id)
    expected = [] if counted.tenant is None else [key]
    if sql != _counted_sql(queryset.model, queryset.db) or [str(param) for param in params] != expected:
        return None
    return key


@functools.cache
def _counted_sql(model: type[Model], using: str) -> str:
    """The SQL of a counted set: the whole table, or one tenant's rows (the same text for every tenant, whose
    id is its one parameter). `_base_manager`, which hides no rows."""
    rows = model._base_manager.using(using)
    tenant = COUNTED[model._meta.db_table].tenant
    whole = rows.all() if tenant is None else rows.filter(**{tenant: uuid.UUID(int=0)})  # any tenant's id
    return whole.query.sql_with_params()[0]


def _as_text(value) -> str:
    """A filter value as PostgreSQL's `::text` writes it (the key the triggers counted it under)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def total(
    queryset: QuerySet, filters: list[tuple[str, object]], *, workspace_id: object = None
) -> int | None:
    """The exact number of the queryset's rows matching `filters` ((column, value) equalities), read from
    the counts when they hold it: PostgreSQL, a counted set (`tenant_of`: the whole table, or the rows of
    the workspace `workspace_id`), and no filter or one on a counted field. None otherwise: the caller
    counts the rows."""
    connection = connections[queryset.db]
    tenant = tenant_of(queryset, workspace_id) if connection.vendor == "postgresql" else None
    if tenant is None or len(filters) > 1:
        return None
    field, value = filters[0] if filters else ("", "")
    if filters and (field not in COUNTED[queryset.model._meta.db_table].fields or value is None):
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(n), 0) FROM iam_row_count "
            "WHERE table_name = %s AND tenant = %s AND field = %s AND value = %s",
            [queryset.model._meta.db_table, tenant, field, _as_text(value)],
        )
        return int(cursor.fetchone()[0])
