"""docs/api.md#lists, #quotas-and-budgets: a list page holds at most IAM_PAGE_MAX_BYTES of serialized records
(at least one), and no list, however large its records within the quotas, grows a worker past about 64 MiB
(High 1: roles of 500 permissions, each with 16 KiB of meta, listed at limit 1000)."""

import json
import tracemalloc

import pytest

from rbac.models import Permission, Role
from tests.conftest import ok
from tests.factories import MembershipFactory, PermissionFactory, ProjectFactory, RoleFactory

pytestmark = pytest.mark.admin("*")


def size(record: dict) -> int:
    return len(json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode())


def test_a_page_ends_before_the_record_that_would_pass_the_budget(workspace, admin, settings):
    for n in range(30):
        ProjectFactory(workspace=workspace, code=f"c{n:02}", description="d" * 900)
    settings.IAM_PAGE_MAX_BYTES = 5000
    body = {"options": {"limit": 1000, "order_bys": "code"}}
    page = ok(admin.call("/projects/list", body))
    count = page["metadata"]["count"]
    assert 1 < count < 30 and page["metadata"]["total"] == 30 and len(page["projects"]) == count
    assert (
        sum(map(size, page["projects"]))
        <= 5000
        < sum(map(size, page["projects"])) + size(page["projects"][0])
    )
    # The next page starts at offset + count: together the pages hold every record once, in order.
    seen, offset = [], 0
    while offset < 30:
        page = ok(admin.call("/projects/list", {"options": {**body["options"], "offset": offset}}))
        seen += [project["code"] for project in page["projects"]]
        offset += page["metadata"]["count"]
    assert seen == [f"c{n:02}" for n in range(30)]


def test_a_record_larger_than_the_budget_comes_alone(workspace, admin, settings):
    ProjectFactory(workspace=workspace, description="d" * 4000)
    ProjectFactory(workspace=workspace)
    settings.IAM_PAGE_MAX_BYTES = 1000
    page = ok(admin.call("/projects/list", {"options": {"limit": 10}}))
    assert page["metadata"]["count"] == 1 and len(page["projects"]) == 1
    assert page["metadata"]["total"] == 2


def test_nested_records_are_whole_and_read_once(workspace, admin, django_assert_max_num_queries):
    """Roles sharing permissions: every role carries each of its permissions whole, as describe does."""
    permissions = PermissionFactory.create_batch(6, workspace=workspace, description="shared")
    for n in range(5):
        RoleFactory(workspace=workspace, name=f"r{n}", permissions=[p.name for p in permissions[n : n + 2]])
    member = MembershipFactory(workspace=workspace, roles=list(Role.objects.filter(name__in=["r0", "r1"])))
    listed = ok(admin.call("/roles/list", {"options": {"limit": 1000}}))["roles"]
    for role in listed:
        assert ok(admin.call("/roles/describe", {"id": role["id"]})) == role
    memberships = ok(admin.call("/memberships/list", {"filter": {"fields": {"id": str(member.pk)}}}))
    assert memberships["memberships"] == [ok(admin.call("/memberships/describe", {"id": str(member.pk)}))]
    assert sorted(role["name"] for role in memberships["memberships"][0]["roles"]) == ["r0", "r1"]


META_BYTES = 16 * 1024


def heavy_meta(n: int) -> dict:
    """Just under 16 KiB of `meta` in many small keys (what parses into the most Python objects per byte)."""
    meta, size, index = {"schema_version": "1"}, len('{"schema_version": "1"}'), 0
    while True:
        key, value = f"k{n}-{index}", f"v{index:06}"
        size += len(key) + len(value) + 8  # the quotes, `: ` and `, `
        if size > META_BYTES - 32:
            return meta
        meta[key] = value
        index += 1


def test_roles_of_500_large_permissions_listed_at_limit_1000_stay_bounded(workspace, admin, settings):
    """docs/api.md#quotas-and-budgets: 1,000 permissions at their size limits (16 KiB meta, 4 KiB description,
    50 tags of 64 characters), 40 roles each holding 500 of them; `roles/list` at limit 1000 built answers of
    hundreds of megabytes. Now: one request's peak allocation stays under 64 MiB."""
    tags = [f"{n:02}" + "t" * 62 for n in range(50)]
    permissions = Permission.objects.bulk_create(
        Permission(
            workspace=workspace, name=f"thing{n}:read", description="d" * 4096, tags=tags, meta=heavy_meta(n)
        )
        for n in range(1000)
    )
    roles = Role.objects.bulk_create(
        Role(workspace=workspace, name=f"role{n}", meta={"schema_version": "1"}) for n in range(40)
    )
    Through = Role.permissions.through
    Through.objects.bulk_create(
        Through(role=role, permission=permissions[(index * 13 + k) % 1000])
        for index, role in enumerate(roles)
        for k in range(500)
    )
    # Warm what a first request warms (the caller's grants), listing nothing.
    ok(admin.call("/roles/list", {"filter": {"fields": {"name": "none"}}}))
    tracemalloc.start()
    try:
        response = admin.call("/roles/list", {"options": {"limit": 1000}})
        # One role of 500 permissions is past the budget by itself: the page holds it alone, whole, and
        # is streamed (tests/iam/test_streamed_answers.py), read here while measured.
        content = b"".join(response.streaming_content) if response.streaming else response.content
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    page = json.loads(content)["data"]
    assert peak < 64 * 1024 * 1024, f"peak allocation {peak / 2**20:.1f} MiB"
    assert page["metadata"]["count"] == 1 and page["metadata"]["total"] == 41
    assert len(page["roles"][0]["permissions"]) == 500
    assert page["roles"][0]["permissions"][0]["meta"] == heavy_meta(
        int(page["roles"][0]["permissions"][0]["name"][5:-5])
    )
    assert len(content) < settings.IAM_PAGE_MAX_BYTES + 2 * size(page["roles"][0])


def test_one_role_of_500_large_permissions_described_stays_bounded(workspace, admin):
    """The same for one record: `roles/describe` (and `roles/update`, which answers the role) of a role
    holding 500 permissions at their size limits stays under 64 MiB."""
    tags = [f"{n:02}" + "t" * 62 for n in range(50)]
    permissions = Permission.objects.bulk_create(
        Permission(
            workspace=workspace, name=f"thing{n}:read", description="d" * 4096, tags=tags, meta=heavy_meta(n)
        )
        for n in range(500)
    )
    role = Role.objects.create(workspace=workspace, name="big", meta={"schema_version": "1"})
    role.permissions.set(permissions)
    ok(admin.call("/roles/list", {"filter": {"fields": {"name": "none"}}}))
    for path, body in (
        ("/roles/describe", {"id": str(role.pk)}),
        ("/roles/update", {"id": str(role.pk), "description": "x"}),
    ):
        tracemalloc.start()
        try:
            response = admin.call(path, body)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 * 1024 * 1024, f"{path}: peak allocation {peak / 2**20:.1f} MiB"
        assert len(ok(response)["permissions"]) == 500
