"""`Record` (iam/serializers.py): every response serializer's fast `to_representation` gives exactly what
DRF's own gives, for records made by the factories and for the same records read back from the database."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

import accounts.serializers
import authn.serializers
import clients.serializers
import rbac.api
import rbac.serializers
import tenancy.serializers
from accounts.models import Account
from authn.models import Credential
from clients.models import Client
from iam.serializers import Record
from rbac.models import Membership, Permission, Role
from tenancy.models import Project, Workspace
from tests.factories import (
    AccountFactory,
    ClientFactory,
    CredentialFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

MODULES = [
    accounts.serializers,
    authn.serializers,
    clients.serializers,
    rbac.serializers,
    tenancy.serializers,
]
PREFETCH = {Membership: ["roles__permissions"], Role: ["permissions"], Client: ["workspace"]}
LATER = datetime(2031, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)


def record_classes() -> list[type[Record]]:
    found, todo = [], [Record]
    while todo:
        for cls in todo.pop().__subclasses__():
            found.append(cls)
            todo.append(cls)
    return [cls for cls in found if cls.__module__ in {module.__name__ for module in MODULES}]


def make_records() -> dict[type, list]:
    workspace = WorkspaceFactory(
        description="the workspace", tags=["a", "b"], meta={"schema_version": "1", "x": [1, {"y": None}]}
    )
    bare = WorkspaceFactory(description=None, tags=[], meta={})
    creator = AccountFactory(description="writes", avatar_url="https://example.com/a.png", tags=["t"])
    account = AccountFactory(
        description=None, avatar_url=None, enabled=False, verified=True, created_by=creator
    )
    Account.objects.filter(pk=account.pk).update(updated_at=LATER)
    project = ProjectFactory(workspace=workspace, description="p", created_by=creator)
    ProjectFactory(workspace=workspace, description=None, code=None, created_by=None)
    PermissionFactory(workspace=workspace, code=None, description=None)
    PermissionFactory(
        workspace=workspace, name="things:write", code="things:write", description="w", tags=["w"]
    )
    roles = [
        RoleFactory(workspace=workspace, permissions=[f"r{r}:p{p}" for p in range(5)], description=d)
        for r, d in enumerate(["one", None, ""])
    ]
    RoleFactory(workspace=bare)  # no permissions
    MembershipFactory(workspace=workspace, account=account, roles=roles)
    MembershipFactory(
        workspace=workspace,
        account=creator,
        project=project,
        scope=Membership.Scope.PROJECT,
        status=Membership.Status.INVITED,
        roles=roles[:1],
        tags=["p"],
    )
    MembershipFactory(workspace=bare)  # no roles
    CredentialFactory(account=account)
    CredentialFactory(
        account=creator, kind=Credential.Kind.OAUTH, provider=Credential.Provider.IDP_A, provider_id="g-1"
    )
    Credential.objects.filter(account=creator).update(last_used_at=LATER - timedelta(days=1))
    made = [
        ClientFactory(workspace=workspace, description="c"),
        ClientFactory(workspace=bare, description=None),
    ]
    read = {
        model: list(model.objects.prefetch_related(*PREFETCH.get(model, [])).order_by("pk"))
        for model in (Account, Workspace, Project, Permission, Role, Membership, Credential, Client)
    }
    by_pk = {client.pk: client.secret for client in made}
    for client in read[Client]:
        client.secret = by_pk.get(client.pk)  # not a column: the plaintext `ClientWithSecret` shows once
    read[Client] = [client for client in read[Client] if client.secret] + made  # also as the factory made it
    read[Membership] += list(Membership.objects.order_by("pk"))  # no prefetch: the relations are queried
    return read


def drf(serializer_class, instance) -> dict:
    """What DRF's own `to_representation` gives, for the record and every nested record."""
    original = Record.to_representation
    Record.to_representation = serializers.ModelSerializer.to_representation
    try:
        return serializer_class(instance).data
    finally:
        Record.to_representation = original


def test_every_response_serializer_is_a_record():
    names = {cls.__name__ for cls in record_classes()}
    assert names >= {
        "AccountSerializer",
        "AccountBriefSerializer",
        "CredentialSerializer",
        "ClientSerializer",
        "ClientWithSecret",
        "PermissionSerializer",
        "RoleSerializer",
        "MembershipSerializer",
        "WorkspaceSerializer",
        "ProjectSerializer",
    }
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, serializers.ModelSerializer):
                assert issubclass(value, Record), value


@pytest.mark.django_db
@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_fast_output_is_drf_output(zone):
    records = make_records()
    with timezone.override(zone):
        compared = 0
        for cls in record_classes():
            instances = records[cls.Meta.model]
            assert instances, cls
            for instance in instances:
                fast = cls(instance).data
                assert fast == drf(cls, instance), (cls.__name__, instance.pk)
                assert JSONRenderer().render(fast) == JSONRenderer().render(drf(cls, instance))
                compared += 1
            many = cls(instances, many=True).data
            assert JSONRenderer().render(many) == JSONRenderer().render(
                [drf(cls, item) for item in instances]
            )
        assert compared > 30


@pytest.mark.django_db
@override_settings(REST_FRAMEWORK={"DATETIME_FORMAT": "%Y-%m-%d %H:%M"})
def test_other_datetime_format_goes_drf_way():
    membership = MembershipFactory(roles=[RoleFactory(permissions=["a:b"])])
    fast = rbac.serializers.MembershipSerializer(membership).data
    assert fast == drf(rbac.serializers.MembershipSerializer, membership)
    assert fast["created_at"] == membership.created_at.strftime("%Y-%m-%d %H:%M")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "load",
    [
        lambda workspace: Membership.objects.prefetch_related("roles__permissions").get(),
        # The endpoints' querysets: the rows in plain lists (`iam.serializers.prefetch`), no manager each.
        lambda workspace: (
            rbac.api.MembershipEndpoint().get_queryset(SimpleNamespace(workspace=workspace)).get()
        ),
    ],
    ids=["prefetch_related", "prefetch"],
)
def test_a_membership_with_roles_reads_its_columns_directly(load, monkeypatch, django_assert_num_queries):
    """The fast path: no DRF `get_attribute` for a column or a prefetched many-to-many, and no query."""
    role = RoleFactory(permissions=["a:b", "c:d"])
    MembershipFactory(workspace=role.workspace, roles=[role])
    membership = load(role.workspace)
    calls = []
    original = serializers.Field.get_attribute
    monkeypatch.setattr(
        serializers.Field, "get_attribute", lambda self, obj: calls.append(self) or original(self, obj)
    )
    with django_assert_num_queries(0):
        data = rbac.serializers.MembershipSerializer(membership).data
    assert sorted(p["name"] for p in data["roles"][0]["permissions"]) == ["a:b", "c:d"]  # a set: no order
    assert calls == []
