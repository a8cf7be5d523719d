"""docs/api.md#quotas-and-budgets: an answer of one object is written as a stream of bounded chunks once it is
large, so a worker never holds it whole (docs/api.md#quotas-and-budgets: a membership of 50 roles of 500
permissions at their size limits answers hundreds of megabytes). The streamed body is the one a small answer
sends whole, byte for byte."""

import json
import tracemalloc

import pytest

import iam.http.endpoint
from iam.http import encoder
from rbac.models import Membership, Permission, Role
from tests.conftest import ok
from tests.factories import AccountFactory, MembershipFactory, PermissionFactory, RoleFactory
from tests.iam.test_page_budget import heavy_meta

pytestmark = pytest.mark.admin("*")


@pytest.fixture
def member(workspace):
    """A membership of two roles sharing a permission, with tags and meta of their own."""
    permissions = PermissionFactory.create_batch(3, workspace=workspace, description="p", tags=["x"])
    first = RoleFactory(workspace=workspace, name="first", permissions=[p.name for p in permissions[:2]])
    second = RoleFactory(workspace=workspace, name="second", permissions=[p.name for p in permissions[1:]])
    return MembershipFactory(
        workspace=workspace, roles=[first, second], tags=["t"], meta={"schema_version": "1", "k": "ü"}
    )


def streamed(response) -> bytes:
    assert response.streaming and not response.has_header("Content-Length")
    return b"".join(response.streaming_content)


def test_a_streamed_answer_is_the_whole_one_byte_for_byte(admin, member, monkeypatch):
    body = {"id": str(member.pk)}
    whole = admin.call("/memberships/describe", body)
    assert not whole.streaming and whole["Content-Length"] == str(len(whole.content))
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    monkeypatch.setattr(iam.http.endpoint, "CHUNK_BYTES", 7)  # many chunks, each cut anywhere
    assert streamed(admin.call("/memberships/describe", body)) == whole.content
    update = {"id": str(member.pk), "tags": ["u"]}
    changed = json.loads(streamed(admin.call("/memberships/update", update)))
    assert changed["data"]["tags"] == ["u"]


def test_the_one_object_is_the_list_s_record(admin, member):
    """The same bytes as `memberships/list` writes for it (the page's encoder, records joined)."""
    described = admin.call("/memberships/describe", {"id": str(member.pk)}).content
    listed = admin.call("/memberships/list", {"filter": {"fields": {"id": str(member.pk)}}}).content
    record = described[len(iam.http.endpoint.ENVELOPE_HEAD) : -len(iam.http.endpoint.ENVELOPE_TAIL)]
    assert b'{"memberships":[' + record + b"]" in listed


def test_another_workspace_s_membership_is_not_found_streamed_or_not(admin, member, monkeypatch):
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    other = MembershipFactory(account=AccountFactory())
    response = admin.call("/memberships/describe", {"id": str(other.pk)})
    assert response.status_code == 404 and not response.streaming


def test_a_membership_of_roles_of_500_large_permissions_streams_within_64_mib(workspace, admin, monkeypatch):
    """Six roles, each of 500 permissions at their size limits out of 1,000 (most permissions in three
    roles): about 75 MB of JSON. Written, read and sent chunk by chunk, the request's peak allocation stays
    far under 64 MiB, with a fixed number of queries per read; the body is whole."""
    monkeypatch.setattr(encoder, "KEPT_BYTES", 4 * 1024 * 1024)  # the permissions cannot all be kept
    tags = [f"{n:02}" + "t" * 62 for n in range(50)]
    permissions = Permission.objects.bulk_create(
        Permission(
            workspace=workspace, name=f"thing{n}:read", description="d" * 4096, tags=tags, meta=heavy_meta(n)
        )
        for n in range(1000)
    )
    roles = Role.objects.bulk_create(
        Role(workspace=workspace, name=f"role{n}", meta={"schema_version": "1"}) for n in range(6)
    )
    Through = Role.permissions.through
    Through.objects.bulk_create(
        Through(role=role, permission=permissions[(index * 125 + k) % 1000])
        for index, role in enumerate(roles)
        for k in range(500)
    )
    member = MembershipFactory(workspace=workspace, roles=roles)
    ok(admin.call("/memberships/describe", {"id": str(MembershipFactory(workspace=workspace).pk)}))
    tracemalloc.start()
    try:
        response = admin.call("/memberships/describe", {"id": str(member.pk)})
        assert response.streaming
        size, tail, chunks = 0, b"", 0
        for chunk in response.streaming_content:
            size, tail, chunks = size + len(chunk), (tail + chunk)[-64:], chunks + 1
            assert len(chunk) < 2 * iam.http.endpoint.CHUNK_BYTES
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 * 1024 * 1024, f"peak allocation {peak / 2**20:.1f} MiB"
    print(f"peak {peak / 2**20:.1f} MiB for {size / 2**20:.1f} MiB in {chunks} chunks")
    assert size > 64 * 1024 * 1024 and chunks > 250 and tail.endswith(b"}}")
    # The whole body, parsed: every role, every permission, in the order the database holds them.
    body = ok(admin.call("/memberships/describe", {"id": str(member.pk)}))
    assert sorted(role["name"] for role in body["roles"]) == [f"role{n}" for n in range(6)]
    for role in body["roles"]:
        index = int(role["name"][4:])
        names = {f"thing{(index * 125 + k) % 1000}:read" for k in range(500)}
        assert {permission["name"] for permission in role["permissions"]} == names
        assert len(role["permissions"]) == 500
    first = body["roles"][0]["permissions"][0]
    assert first["meta"] == heavy_meta(int(first["name"][5:-5])) and first["tags"] == tags


def test_reads_stay_a_fixed_number_per_batch(admin, member, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        ok(admin.call("/memberships/describe", {"id": str(member.pk)}))
    assert Membership.objects.get(pk=member.pk).roles.count() == 2


def test_a_list_whose_first_record_passes_the_budget_streams_it_alone(
    admin, member, workspace, settings, monkeypatch
):
    """A page holds at least one record: one past the whole budget is the page by itself, written as it
    is sent (streamed past STREAM_FROM), the same bytes as its describe; a later one past what is left
    ends the page before it."""
    described = admin.call("/memberships/describe", {"id": str(member.pk)}).content
    record = described[len(iam.http.endpoint.ENVELOPE_HEAD) : -len(iam.http.endpoint.ENVELOPE_TAIL)]
    settings.IAM_PAGE_MAX_BYTES = 100
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    body = {"filter": {"fields": {"id": str(member.pk)}}}
    response = admin.call("/memberships/list", body)
    assert response.streaming
    page = b"".join(response.streaming_content)
    assert page.startswith(iam.http.endpoint.ENVELOPE_HEAD + b'{"memberships":[' + record + b'],"metadata":')
    assert json.loads(page)["data"]["metadata"]["count"] == 1
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 1024 * 1024)
    assert admin.call("/memberships/list", body).content == page  # under STREAM_FROM: whole
    MembershipFactory(workspace=workspace, account=AccountFactory())
    settings.IAM_PAGE_MAX_BYTES = len(record) + 10  # the first fits, the second passes what is left
    listed = ok(admin.call("/memberships/list", {"options": {"order_bys": ["created_at"]}}))
    assert listed["metadata"]["count"] == 1 and listed["metadata"]["total"] >= 2
