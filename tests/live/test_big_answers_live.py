"""docs/api.md#quotas-and-budgets against the running service: no single request of a tenant, whatever it
stored within its quotas, grows a web worker by more than about 64 MiB. The worst one answer within the
default quotas: a membership holding 50 roles (ROLES_PER_MEMBERSHIP), each holding 500 permissions
(PERMISSIONS_PER_ROLE) out of the workspace's 5,000 (PERMISSIONS), each permission at its size limits (a
128-character name and code, 4 KiB of description, 50 tags of 64 characters, 16 KiB of meta):
`memberships/describe` answers some 600 MB. A web tier of one worker serves it; the worker's peak resident
memory (VmHWM) grows by less than 64 MiB while the client receives the whole body, which parses, role by role,
into every role and every permission.

The roles and the membership are made over HTTP (the roles still empty); then the 5,000 large permissions
and the roles' 25,000 links are written straight into the database (through the service, they are 5,000
requests and minutes)."""

import codecs
import contextlib
import json
import os
import time
from pathlib import Path

import psycopg
import pytest
import requests

from tests.live.api import META, create_workspace, memory, ok, unique, worker_pid

ROLES = 50  # IAM_QUOTA_ROLES_PER_MEMBERSHIP
PER_ROLE = 500  # IAM_QUOTA_PERMISSIONS_PER_ROLE
PERMISSIONS = 5000  # IAM_QUOTA_PERMISSIONS
STEP = PERMISSIONS // ROLES  # role i holds permissions i*STEP .. i*STEP+499 (mod 5,000): each in five roles
META_KEYS = 560  # `k<n>-<i>: value-<i>` pairs: just under 16 KiB of meta as the API writes it
GROWTH_LIMIT = 64 * 1024 * 1024

SEED_PERMISSIONS = """
INSERT INTO rbac_permission (id, workspace_id, name, code, description, tags, meta, created_at, updated_at)
SELECT gen_random_uuid(), %(workspace)s, names.name, names.name, repeat('d', 4096),
       (SELECT jsonb_agg(lpad(k::text, 2, '0') || repeat('t', 62)) FROM generate_series(0, 49) AS k),
       (SELECT jsonb_object_agg(format('k%%s-%%s', n, i), format('value-%%s', lpad(i::text, 6, '0')))
          FROM generate_series(1, %(keys)s) AS i) || '{"schema_version": "1"}'::jsonb,
       now(), now()
FROM generate_series(0, %(last)s) AS n,
     LATERAL (SELECT format('resource%%s:%%s', lpad(n::text, 4, '0'), repeat('a', 100)) AS name) AS names
"""
SEED_LINKS = """
WITH permission AS (
    SELECT id, (row_number() OVER (ORDER BY name)) - 1 AS n
    FROM rbac_permission WHERE workspace_id = %(workspace)s AND name LIKE 'resource%%'
), role AS (
    SELECT id, (row_number() OVER (ORDER BY name)) - 1 AS i FROM rbac_role WHERE id = ANY(%(roles)s)
)
INSERT INTO rbac_role_permissions (role_id, permission_id)
SELECT role.id, permission.id
FROM role CROSS JOIN generate_series(0, %(per_role)s - 1) AS k
JOIN permission ON permission.n = (role.i * %(step)s + k) %% %(permissions)s
"""


@pytest.fixture(scope="module")
def one_worker(live):
    """A web tier of its own with one worker process, whose memory is the one measured."""
    web = live.start_web(workers=1)
    yield web
    web.stop()


@pytest.fixture(scope="module")
def huge_membership(live, one_worker) -> dict:
    base = one_worker.url
    owner = live.register()["access_token"]  # a self-registered tenant, within the default quotas
    workspace = create_workspace(live, owner)["id"]
    roles = []
    for n in range(ROLES):
        body = {"name": f"role{n:02}-{unique('r')}", "permission_ids": [], "tags": [], "meta": META}
        roles.append(ok(live.post("/roles/create", body, token=owner, workspace=workspace, base=base))["id"])
    invitee = live.register()["account"]["id"]
    body = {
        "account_id": invitee,
        "scope": "workspace",
        "status": "active",
        "role_ids": roles,
        "tags": [],
        "meta": META,
    }
    membership = ok(
        live.post("/memberships/create", body, token=owner, workspace=workspace, base=base, timeout=300)
    )
    # Two more invitees: one to accept the same 50 roles through `invitations/accept`, one to accept a
    # membership of one role first (what that request warms).
    invitees = {}
    for name, held in (("invitee", roles), ("small_invitee", roles[:1])):
        registered = live.register()
        invited = {**body, "account_id": registered["account"]["id"], "role_ids": held}
        created = live.post(
            "/memberships/create", invited, token=owner, workspace=workspace, base=base, timeout=300
        )
        invitees[name] = {"token": registered["access_token"], "id": ok(created)["id"]}
    with psycopg.connect(live.env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(SEED_PERMISSIONS, {"workspace": workspace, "keys": META_KEYS, "last": PERMISSIONS - 1})
        conn.execute(
            SEED_LINKS,
            {
                "workspace": workspace,
                "roles": roles,
                "per_role": PER_ROLE,
                "step": STEP,
                "permissions": PERMISSIONS,
            },
        )
    small = {**body, "account_id": live.register()["account"]["id"], "role_ids": roles[:1]}
    return {
        "owner": owner,
        "workspace": workspace,
        "id": membership["id"],
        **invitees,
        "small": ok(
            live.post("/memberships/create", small, token=owner, workspace=workspace, base=base, timeout=60)
        )["id"],
    }


def roles_in(chunks, expected_head: str):
    """Parses the streamed envelope of a membership role by role (each about 12 MB, never the whole body
    at once): yields each role as parsed; at the end, the envelope itself with `roles` emptied."""
    decoder = json.JSONDecoder()
    text = codecs.getincrementaldecoder("utf-8")()
    source = iter(chunks)
    buffer, done = "", False

    def more(at_least: int) -> bool:
        nonlocal buffer, done
        while not done and len(buffer) < at_least:
            chunk = next(source, None)
            if chunk is None:
                buffer += text.decode(b"", final=True)
                done = True
            else:
                buffer += text.decode(chunk)
        return len(buffer) >= at_least

    marker = '"roles":['
    while marker not in buffer:
        assert more(len(buffer) + 1), "the body ends before the roles"
    at = buffer.index(marker) + len(marker)
    head, buffer = buffer[:at], buffer[at:]
    assert head.startswith(expected_head), head[:200]
    want = 1024 * 1024
    while True:
        more(1)
        buffer = buffer.lstrip(",")
        if buffer.startswith("]"):
            break
        try:
            role, end = decoder.raw_decode(buffer)
        except json.JSONDecodeError:
            had = len(buffer)
            more(had + want)
            assert len(buffer) > had, "the body ends inside a role"
            want *= 2  # read twice as much before the next try: parsing stays linear in the body
            continue
        buffer, want = buffer[end:], 1024 * 1024
        yield role
    while more(len(buffer) + 1):
        pass
    yield json.loads(head[:-1] + "[" + buffer)


def assert_bounded_growth(size: int, elapsed: float, before: dict, after: dict, sampled: int) -> None:
    """The worker's peak RSS (its high-water mark, or the highest sample) grew by less than GROWTH_LIMIT
    while it answered `size` bytes; prints the figures."""
    growth = max(after["VmHWM"], sampled) - before["VmRSS"]
    report = (
        f"{size / 2**20:.0f} MiB answered in {elapsed:.1f} s; worker RSS {before['VmRSS'] / 2**20:.0f} MiB "
        f"before, peak {after['VmHWM'] / 2**20:.0f} MiB (sampled {sampled / 2**20:.0f} MiB): "
        f"+{growth / 2**20:.1f} MiB"
    )
    print(report)
    assert growth < GROWTH_LIMIT, report


def test_the_largest_membership_within_the_quotas_is_answered_within_64_mib(
    live, one_worker, huge_membership
):
    base = one_worker.url
    headers = {
        "Authorization": f"Bearer {huge_membership['owner']}",
        "X-Workspace": huge_membership["workspace"],
        "Content-Type": "application/json",
    }
    describe = f"{base}/memberships/describe"
    # What any first request warms (the code paths, the caller's grants, a connection): a small membership.
    for _ in range(2):
        small = requests.post(describe, json={"id": huge_membership["small"]}, headers=headers, timeout=60)
        assert small.status_code == 200 and len(small.json()["data"]["roles"]) == 1
    pid = worker_pid(one_worker)
    with contextlib.suppress(OSError):  # resets VmHWM to the current VmRSS (else: the peak since start)
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = memory(pid)
    sampled = before["VmRSS"]

    started = time.monotonic()
    response = requests.post(
        describe, json={"id": huge_membership["id"]}, headers=headers, stream=True, timeout=120
    )
    assert response.status_code == 200, response.text[:2000]
    assert response.headers.get("Transfer-Encoding") == "chunked"
    size = 0

    def counted():
        nonlocal size, sampled
        for index, chunk in enumerate(response.iter_content(1024 * 1024)):
            size += len(chunk)
            if index % 16 == 0:
                sampled = max(sampled, memory(pid)["VmRSS"])
            yield chunk

    expected_head = '{"success":true,"status":200,"data":{"id":"' + huge_membership["id"] + '"'
    names, seen = set(), 0
    for parsed in roles_in(counted(), expected_head):
        if "success" in parsed:
            envelope = parsed
            break
        index = int(parsed["name"][4:6])
        assert len(parsed["permissions"]) == PER_ROLE, parsed["name"]
        held = {int(permission["name"][8:12]) for permission in parsed["permissions"]}
        assert held == {(index * STEP + k) % PERMISSIONS for k in range(PER_ROLE)}, parsed["name"]
        permission = parsed["permissions"][0]
        assert len(permission["description"]) == 4096 and len(permission["tags"]) == 50
        assert len(permission["meta"]) == META_KEYS + 1 and permission["meta"]["schema_version"] == "1"
        names.add(parsed["name"])
        seen += len(parsed["permissions"])
    elapsed = time.monotonic() - started
    after = memory(pid)

    assert envelope["success"] is True and envelope["data"]["id"] == huge_membership["id"]
    assert envelope["data"]["roles"] == [] and envelope["data"]["status"] == "invited"
    assert len(names) == ROLES and seen == ROLES * PER_ROLE
    assert size > ROLES * PER_ROLE * 20_000, size  # every permission whole: some 600 MB
    assert_bounded_growth(size, elapsed, before, after, sampled)
    # The worker is still there and serves the next request.
    assert worker_pid(one_worker) == pid and os.path.exists(f"/proc/{pid}")
    again = requests.post(describe, json={"id": huge_membership["small"]}, headers=headers, timeout=60)
    assert again.status_code == 200


def test_accepting_an_invitation_to_the_largest_membership_is_answered_within_64_mib(
    live, one_worker, huge_membership
):
    """`invitations/accept` of an invited membership of the same 50 roles of 500 permissions answers it
    twice, as the invitation and as the membership (some 1.2 GB): both streamed, the worker's peak
    resident memory grows by less than 64 MiB (docs/api.md#quotas-and-budgets)."""
    base = one_worker.url
    accept = f"{base}/invitations/accept"

    def headers(who: str) -> dict:
        return {
            "Authorization": f"Bearer {huge_membership[who]['token']}",
            "Content-Type": "application/json",
        }

    # What this request's first run warms: accepting the invitation to a membership of one role.
    small = huge_membership["small_invitee"]
    warm = requests.post(accept, json={"id": small["id"]}, headers=headers("small_invitee"), timeout=60)
    assert warm.status_code == 200, warm.text[:2000]
    assert len(warm.json()["data"]["membership"]["roles"]) == 1
    invited = huge_membership["invitee"]["id"]
    pid = worker_pid(one_worker)
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = memory(pid)
    sampled = before["VmRSS"]

    started = time.monotonic()
    response = requests.post(
        accept, json={"id": invited}, headers=headers("invitee"), stream=True, timeout=300
    )
    assert response.status_code == 200, response.text[:2000]
    assert response.headers.get("Transfer-Encoding") == "chunked"
    # Read as it comes, never held: its size, its start and end, and the roles it names, counted.
    marker = b'"name":"role'
    size, head, tail, roles = 0, b"", b"", 0
    for index, chunk in enumerate(response.iter_content(1024 * 1024)):
        size += len(chunk)
        if len(head) < 200:
            head = (head + chunk)[:200]
        roles += (tail[-(len(marker) - 1) :] + chunk).count(marker)
        tail = (tail + chunk)[-4096:]
        if index % 16 == 0:
            sampled = max(sampled, memory(pid)["VmRSS"])
    elapsed = time.monotonic() - started
    after = memory(pid)

    assert head.startswith(b'{"success":true,"status":200,"data":{"invitation":{"id":"' + invited.encode())
    assert tail.endswith(b"}}}"), tail[-200:]
    assert roles == 2 * ROLES, roles  # the invitation's 50 roles, then the membership's
    assert size > 2 * ROLES * PER_ROLE * 20_000, size  # every permission whole, twice: some 1.2 GB
    assert_bounded_growth(size, elapsed, before, after, sampled)
    # Accepted: the membership is active, and the worker serves the next request.
    owner = {
        "Authorization": f"Bearer {huge_membership['owner']}",
        "X-Workspace": huge_membership["workspace"],
    }
    small_member = requests.post(
        f"{base}/memberships/describe", json={"id": small["id"]}, headers=owner, timeout=60
    )
    assert small_member.status_code == 200 and small_member.json()["data"]["status"] == "active"
    assert worker_pid(one_worker) == pid
    again = requests.post(f"{base}/invitations/mine", json={}, headers=headers("invitee"), timeout=60)
    assert again.status_code == 200 and again.json()["data"]["invitations"] == []
