"""docs/api.md#quotas-and-budgets for the invitee's endpoints: `invitations/accept`, `invitations/decline` and
`invitations/mine` answer invitations and memberships that each hold up to 50 roles of 500 permissions,
so they are written by the encoder that writes describes and lists (`iam.http.encoder.Encoder`), streamed
when large, `mine`'s page within its byte budget. Each answer is checked twice, answered whole and
streamed in chunks of 7 bytes: its bytes are those of the describes of what it holds (`invitations/
describe`, `memberships/describe`: the same records, byte for byte), and its content is what the whole
DRF answers held before (the same JSON values; roles and permissions in any order, as before; the JSON
columns, `tags` and `meta`, written as the database holds them, as every describe has since the stream
merge).

Workspace A invites with roles sharing permissions with tags and meta; workspace B is someone else's and
invites the same address and another."""

import json

import pytest
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

import iam.http.endpoint
from accounts.models import Account
from iam.http.endpoint import envelope
from rbac.models import Invitation, Membership
from rbac.serializers import InvitationSerializer, MembershipSerializer, RoleSerializer
from tests.conftest import client_for, err, ok
from tests.factories import MembershipFactory, PermissionFactory, RoleFactory, WorkspaceFactory
from tests.rbac.test_invitations import invite, token_mailed_to, verified

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture(params=["whole", "streamed"])
def answered(request, monkeypatch):
    """How answers go out: whole (with their length), or streamed in 7-byte chunks."""
    if request.param == "streamed":
        monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
        monkeypatch.setattr(iam.http.endpoint, "CHUNK_BYTES", 7)
    return request.param


def body_of(response, answered: str) -> bytes:
    assert response.status_code == 200, response.content[:500]
    if answered == "whole":
        assert not response.streaming and response["Content-Length"] == str(len(response.content))
        return response.content
    assert response.streaming and not response.has_header("Content-Length")
    return b"".join(response.streaming_content)


def rendered(data) -> bytes:
    return JSONRenderer().render(envelope(data))


def record_bytes(response) -> bytes:
    """The `data` of an answer, as bytes (whole or streamed)."""
    assert response.status_code == 200, response.content[:500]
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body.startswith(iam.http.endpoint.ENVELOPE_HEAD) and body.endswith(iam.http.endpoint.ENVELOPE_TAIL)
    return body[len(iam.http.endpoint.ENVELOPE_HEAD) : -len(iam.http.endpoint.ENVELOPE_TAIL)]


def described(api, path: str, pk) -> bytes:
    return record_bytes(api.call(path, {"id": str(pk)}))


def composed(**members: bytes) -> bytes:
    """The answer of an object whose members are these JSON texts, in order."""
    inner = b",".join(json.dumps(name).encode() + b":" + value for name, value in members.items())
    return iam.http.endpoint.ENVELOPE_HEAD + b"{" + inner + b"}" + iam.http.endpoint.ENVELOPE_TAIL


def content(value):
    """JSON values with roles and permissions in a fixed order (none is promised, then as now)."""
    if isinstance(value, dict):
        return {
            key: sorted(map(content, item), key=lambda x: x["id"])
            if key in ("roles", "permissions")
            else content(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [content(item) for item in value]
    return value


def same_content(body: bytes, before) -> bool:
    """The answer holds what the whole DRF answer `before` held."""
    assert content(json.loads(body)) == content(json.loads(rendered(before)))
    return True


def same(body: bytes, expected: bytes) -> bool:
    """`body == expected`, saying where they part when they do."""
    if body != expected:
        at = next((i for i, (x, y) in enumerate(zip(body, expected, strict=False)) if x != y), None)
        at = min(len(body), len(expected)) if at is None else at
        raise AssertionError(f"at {at}: {body[at - 80 : at + 80]!r} != {expected[at - 80 : at + 80]!r}")
    return True


def roles_with_shared_permissions(workspace, n: int = 2) -> list:
    permissions = [
        PermissionFactory(
            workspace=workspace,
            description="d\u2028ü",
            tags=["x", "y"],
            meta={"schema_version": "1", "k": "ü", "n": [1, 2.5, None]},
        )
        for _ in range(3)
    ]
    return [
        RoleFactory(
            workspace=workspace, name=f"role{i}", permissions=[p.name for p in permissions[i : i + 2]]
        )
        for i in range(n)
    ]


@pytest.fixture
def tenant(member_of):
    a, b = WorkspaceFactory(slug="tenant-a"), WorkspaceFactory(slug="tenant-b")
    _, owner_api = member_of(a, "*")
    _, other_api = member_of(b, "*")
    return a, b, owner_api, other_api, roles_with_shared_permissions(a), roles_with_shared_permissions(b)


def invite_with(api, roles, email="invitee@example.com", **body) -> dict:
    return invite(api, roles[0], email=email, role_ids=[str(role.pk) for role in roles], **body)


def invitation_of_before(invitation_id) -> dict:
    return InvitationSerializer(Invitation.objects.get(pk=invitation_id)).data


def membership_of_before(membership_id) -> dict:
    return MembershipSerializer(Membership.objects.get(pk=membership_id)).data


def membership_as_invitation_before(membership: Membership) -> dict:
    """The shape the invitee's endpoints built before (`membership_as_invitation`: a dict, rendered whole)."""
    membership = Membership.objects.select_related("account").get(pk=membership.pk)

    def time(value):
        return serializers.DateTimeField().to_representation(value) if value is not None else None

    return {
        "id": str(membership.pk),
        "workspace_id": str(membership.workspace_id),
        "email": membership.account.email,
        "scope": membership.scope,
        "project_id": str(membership.project_id) if membership.project_id else None,
        "roles": RoleSerializer(list(membership.roles.all()), many=True).data,
        "status": Invitation.Status.PENDING if membership.status == Membership.Status.INVITED else "accepted",
        "invited_by": None,
        "membership_id": str(membership.pk),
        "created_at": time(membership.created_at),
        "expires_at": None,
        "accepted_at": time(membership.accepted_at),
    }


def test_accept_by_link_answers_the_describes_of_what_it_holds(api, tenant, answered):
    a, _, owner_api, _, roles, _ = tenant
    invitee = verified("invitee@example.com")
    created = invite_with(owner_api, roles)
    body = body_of(
        api.call("/invitations/accept", {"token": token_mailed_to("invitee@example.com")}), answered
    )
    membership = Membership.objects.get(account=invitee, workspace=a)
    assert same(
        body,
        composed(
            invitation=described(owner_api, "/invitations/describe", created["id"]),
            membership=described(owner_api, "/memberships/describe", membership.pk),
        ),
    )
    before = {
        "invitation": invitation_of_before(created["id"]),
        "membership": membership_of_before(membership.pk),
    }
    assert same_content(body, before)
    assert len(json.loads(body)["data"]["membership"]["roles"]) == 2


def test_accept_creating_the_account_appends_its_session(api, tenant, answered):
    a, _, owner_api, _, roles, _ = tenant
    created = invite_with(owner_api, roles, email="new@example.com")
    token = token_mailed_to("new@example.com")
    response = api.call("/invitations/accept", {"token": token, "password": NEW_PASSWORD, "name": "New"})
    body = body_of(response, answered)
    data = json.loads(body)["data"]
    assert list(data) == ["invitation", "membership", "access_token", "refresh_token"]
    account = Account.objects.get(email="new@example.com")
    membership = Membership.objects.get(account=account, workspace=a)
    assert same(
        body,
        composed(
            invitation=described(owner_api, "/invitations/describe", created["id"]),
            membership=described(owner_api, "/memberships/describe", membership.pk),
            access_token=json.dumps(data["access_token"]).encode(),
            refresh_token=json.dumps(data["refresh_token"]).encode(),
        ),
    )
    assert data["membership"]["status"] == "active"


def test_accept_an_invited_membership_by_id(tenant, answered):
    _, b, _, other_api, _, roles_b = tenant
    invitee = verified("invitee@example.com")
    invited = MembershipFactory(account=invitee, workspace=b, status="invited", roles=roles_b)
    someone = verified("someone@example.com")
    # Another account cannot accept it by its id, streamed or not.
    err(client_for(someone).call("/invitations/accept", {"id": str(invited.pk)}), 404, "invitation not found")
    body = body_of(client_for(invitee).call("/invitations/accept", {"id": str(invited.pk)}), answered)
    membership = described(other_api, "/memberships/describe", invited.pk)
    assert body.endswith(b',"membership":' + membership + b"}" + iam.http.endpoint.ENVELOPE_TAIL)
    before = {
        "invitation": membership_as_invitation_before(invited),
        "membership": membership_of_before(invited.pk),
    }
    assert same_content(body, before)
    assert json.loads(body)["data"]["invitation"]["status"] == "accepted"


def test_decline_answers_the_invitation(api, tenant, answered):
    _, b, owner_api, _, roles, roles_b = tenant
    invitee = verified("invitee@example.com")
    created = invite_with(owner_api, roles)
    body = body_of(
        api.call("/invitations/decline", {"token": token_mailed_to("invitee@example.com")}), answered
    )
    invitation = described(owner_api, "/invitations/describe", created["id"])
    assert same(body, iam.http.endpoint.ENVELOPE_HEAD + invitation + iam.http.endpoint.ENVELOPE_TAIL)
    assert same_content(body, invitation_of_before(created["id"]))
    assert json.loads(body)["data"]["status"] == "declined"
    # An invited membership, by id: the shape it had before it was deleted, `declined`.
    invited = MembershipFactory(account=invitee, workspace=b, status="invited", roles=roles_b)
    before = membership_as_invitation_before(invited) | {"status": Invitation.Status.DECLINED}
    body = body_of(client_for(invitee).call("/invitations/decline", {"id": str(invited.pk)}), answered)
    assert same_content(body, before) and not Membership.objects.filter(pk=invited.pk).exists()
    assert len(json.loads(body)["data"]["roles"]) == 2


def mine_before(account: Account, order_bys: list[str]) -> dict:
    """`invitations/mine`'s whole answer as it was built before, one page of everything."""
    records = [
        (InvitationSerializer(invitation).data, invitation.updated_at)
        for invitation in Invitation.objects.filter(email=account.email, status="pending")
    ] + [
        (membership_as_invitation_before(membership), membership.updated_at)
        for membership in Membership.objects.filter(account=account, status="invited")
    ]
    shaped = [
        {**record, "updated_at": serializers.DateTimeField().to_representation(updated_at)}
        for record, updated_at in records
    ]
    for record in shaped:  # UUIDs as the JSON writes them, so that they sort together with strings
        record["workspace_id"] = str(record["workspace_id"])
    shaped.sort(key=lambda record: record["id"], reverse=order_bys[-1].startswith("!"))
    for item in reversed(order_bys):
        name = item.removeprefix("!")
        shaped.sort(
            key=lambda r, name=name: (r[name] is not None, r[name] or ""), reverse=item.startswith("!")
        )
    page = [{key: value for key, value in record.items() if key != "updated_at"} for record in shaped]
    metadata = {"total": len(page), "count": len(page), "offset": 0, "limit": 100, "order_bys": order_bys}
    return {"invitations": page, "metadata": metadata}


@pytest.mark.parametrize("order_bys", [["!created_at"], ["workspace_id", "!id"]])
def test_mine_answers_what_it_answered_before(tenant, order_bys):
    """A page within its byte budget is answered whole (lists join their pages)."""
    _, _, owner_api, other_api, roles, roles_b = tenant
    invitee = verified("invitee@example.com")
    to_a = invite_with(owner_api, roles)
    invite_with(other_api, roles_b[:1])
    invite_with(other_api, roles_b, email="someone-else@example.com")  # not the caller's
    MembershipFactory(account=invitee, workspace=WorkspaceFactory(), status="invited", roles=[])
    c = WorkspaceFactory()
    MembershipFactory(account=invitee, workspace=c, status="invited", roles=roles_with_shared_permissions(c))
    MembershipFactory(account=invitee, workspace=WorkspaceFactory())  # active: not an invitation
    options = {} if order_bys == ["!created_at"] else {"options": {"order_bys": order_bys}}
    body = body_of(client_for(invitee).call("/invitations/mine", options), "whole")
    page = json.loads(body)["data"]
    assert same_content(body, mine_before(invitee, order_bys))
    assert [item["id"] for item in page["invitations"]] == [
        item["id"] for item in mine_before(invitee, order_bys)["invitations"]
    ]
    assert page["metadata"]["total"] == 4
    # An invitation's record is its describe's bytes.
    assert described(owner_api, "/invitations/describe", to_a["id"]) in body


def test_mine_keeps_its_page_within_the_byte_budget(tenant, settings, monkeypatch):
    """docs/api.md#lists: the page ends before the record that would pass IAM_PAGE_MAX_BYTES; a first record
    past it comes alone, streamed past STREAM_FROM; the pages together hold every record once."""
    _, _, owner_api, other_api, roles, roles_b = tenant
    invitee = verified("invitee@example.com")
    invite_with(owner_api, roles)
    invite_with(other_api, roles_b)
    for _ in range(3):
        MembershipFactory(account=invitee, workspace=WorkspaceFactory(), status="invited", roles=roles_b)
    mine = client_for(invitee)
    order = {"order_bys": "id"}
    whole = ok(mine.call("/invitations/mine", {"options": order}))["invitations"]
    assert len(whole) == 5
    head = b'{"invitations":['
    sizes = []  # each record's bytes as a page writes it
    for offset in range(5):
        page = record_bytes(
            mine.call("/invitations/mine", {"options": {**order, "limit": 1, "offset": offset}})
        )
        sizes.append(page.index(b'],"metadata":') - len(head))
    settings.IAM_PAGE_MAX_BYTES = sizes[0] + sizes[1] + 1  # the first two fit, not the third
    assert ok(mine.call("/invitations/mine", {"options": order}))["metadata"]["count"] == 2
    seen, offset = [], 0
    while offset < 5:
        page = ok(mine.call("/invitations/mine", {"options": {**order, "offset": offset}}))
        count = page["metadata"]["count"]
        assert count >= 1 and page["metadata"]["total"] == 5 and len(page["invitations"]) == count
        assert count == 1 or sum(sizes[offset : offset + count]) <= settings.IAM_PAGE_MAX_BYTES
        seen += page["invitations"]
        offset += count
    assert seen == whole
    settings.IAM_PAGE_MAX_BYTES = 10
    monkeypatch.setattr(iam.http.endpoint, "STREAM_FROM", 0)
    response = mine.call("/invitations/mine", {"options": order})
    assert response.streaming
    page = json.loads(b"".join(response.streaming_content))["data"]
    assert page["invitations"] == whole[:1] and page["metadata"]["count"] == 1
    # Another account sees none of these.
    assert ok(client_for(verified("someone@example.com")).call("/invitations/mine"))["invitations"] == []
