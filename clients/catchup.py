"""`POST /clients/events`: a client reads its workspace's events from the log (`iam.models.Event`),
page by page, after a cursor: what push sent while it was down, or everything when it starts fresh.

Commit order. Two transactions can commit in the other order than their rows got ids, so "the events
after id N" would skip one that commits late. On PostgreSQL every row carries its writing transaction's
id (`xid`, 64-bit), and a read serves only rows whose `xid` is below a horizon: the oldest transaction
of this database still running (`pg_stat_activity.backend_xid`, widened to 64 bits), or, when none runs,
the snapshot's `xmax` (every transaction id below it has been handed out). Only transactions of this
database write the log, and every one below the horizon has finished, so no row can ever appear below
it again; transactions still running, or not yet begun, can only add rows above it. Rows are served in
(`xid`, `id`) order and the cursor is the last position served, so nothing can later appear before a
cursor: an event that commits late is served after the cursor, never skipped.

The horizon is read first and the rows by a later statement, so under READ COMMITTED (Django's default)
the rows' snapshot sees every transaction that finished before the horizon was taken. (The simpler
`pg_snapshot_xmin(pg_current_snapshot())` is as sound but counts the transactions of every database of
the server, so one long write elsewhere would hold back every event here.) The price: while a
transaction of this database runs, the events of later ones wait for it (a long transaction delays
events, it never loses them). An event that committed before another transaction began always comes
first; overlapping transactions are ordered by their ids. On SQLite one writer at a time makes `id`
order the commit order (`xid` is 0).

Cursor: `<xid>.<id>.<unix seconds>`, the position of the last event served and a time after which
nothing before that position can still be missing (the event's own time, or the time of the read once
the reader has caught up). Events are kept `IAM_EVENT_RETENTION_DAYS`; a cursor older than that answers
410 `cursor expired` and the caller resynchronises. `manage.py cleanup` keeps events an hour longer than
that, the bound on how long a transaction may hold an earlier position."""

import re
from datetime import timedelta
from uuid import UUID

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from iam.http.errors import ApiError
from iam.models import Event
from iam.platform import crypto

from .client_cache import ClientRecord, find_client, root_workspace_id

CURSOR_RE = re.compile(r"(\d{1,19})\.(\d{1,19})\.(\d{1,12})")
INVALID_CLIENT = "invalid client"


def authenticate(client_id: UUID, client_secret: str) -> ClientRecord:
    """The check of `clients/validate` (same cached record, same keyed digest): an unknown client, a wrong
    secret or a regenerated one is refused, here with 401 `invalid client`."""
    client = find_client(client_id)
    if client is None or not crypto.digest_matches(client_secret, client.secret_digest):
        raise ApiError(401, INVALID_CLIENT)
    return client


def parse_cursor(value: str) -> tuple[int, int, int]:
    match = CURSOR_RE.fullmatch(value)
    if match is None:
        raise ApiError(400, "invalid after", "after")
    return int(match[1]), int(match[2]), int(match[3])


# The oldest transaction id of this database still running, else the snapshot's xmax. `backend_xid` is
# 32-bit: it is widened with the epoch of `xmax`, within 2^31 of which every running id lies.
HORIZON_SQL = """
SELECT LEAST(s.xmax, MIN(s.xmax + ((a.backend_xid::text::bigint - s.xmax % 4294967296) % 4294967296
                                   + 6442450944) % 4294967296 - 2147483648))
FROM (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax) AS s
LEFT JOIN pg_stat_activity AS a ON a.datname = current_database() AND a.backend_xid IS NOT NULL
GROUP BY s.xmax
"""


def horizon() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # activity as of now, not of the transaction
        cursor.execute(HORIZON_SQL)
        return cursor.fetchone()[0]


def read(workspace_id: str, *, after: str | None, limit: int) -> dict:
    """A client of the root workspace reads every workspace's events, as it hears every workspace's pushes
    (docs/integration.md#one-backend-for-many-workspaces)."""
    now = timezone.now()
    events = Event.objects.all()
    if str(workspace_id) != root_workspace_id():
        events = events.filter(workspace_id=workspace_id)
    if connection.vendor == "postgresql":
        events = events.filter(xid__lt=horizon())
    position = (0, 0)
    if after is not None:
        xid, last_id, seen_at = parse_cursor(after)
        if seen_at < (now - timedelta(days=settings.IAM_EVENT_RETENTION_DAYS)).timestamp():
            raise ApiError(410, "cursor expired", "after")
        events = events.filter(Q(xid__gt=xid) | Q(xid=xid, id__gt=last_id))
        position = (xid, last_id)
    rows = list(events.order_by("xid", "id").values_list("xid", "id", "payload", "created_at")[:limit])
    has_more = len(rows) == limit
    if rows:
        position = rows[-1][:2]
    # Caught up: nothing before the position can still be missing now. Otherwise: as of the last event.
    seen_at = rows[-1][3] if has_more else now
    return {
        "events": [row[2] for row in rows],
        "next_cursor": f"{position[0]}.{position[1]}.{int(seen_at.timestamp())}",
        "has_more": has_more,
    }
