"""`ResourceSerializer` (iam/http/serializers.py): every response serializer's fast `to_representation` gives
exactly what DRF's own gives, for records made by the factories and for the same records read back from the
database."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

import accounts.serializers
import authn.serializers
import clients.serializers
import rbac.serializers
import tenancy.serializers
from accounts.models import Account
from authn.models import Credential, Passkey, Session
from authn.sessions import issue_session
from clients.models import Client
from iam.http.serializers import ResourceSerializer, prefetch
from rbac.models import Invitation, Membership, Permission, Role, ServiceAccount, ServiceAccountKey
from rbac.services.service_accounts import create_key, create_service_account, revoke_key
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
PREFETCH = {
    Membership: ["roles__permissions"],
    Invitation: ["roles__permissions"],
    Role: ["permissions"],
    Client: ["workspace"],
}
LATER = datetime(2031, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)


def record_classes() -> list[type[ResourceSerializer]]:
    found, todo = [], [ResourceSerializer]
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
    issue_session(account, amr=["pwd"], ip="10.0.0.1", user_agent="agent")
    issue_session(creator, amr=["fed"], ip="2001:db8::1")
    issue_session(creator, amr=[], ip=None)
    made = [
        ClientFactory(workspace=workspace, description="c"),
        ClientFactory(workspace=bare, description=None),
    ]
    invitation = Invitation.objects.create(
        workspace=workspace,
        email="invited@example.com",
        scope=Membership.Scope.PROJECT,
        project=project,
        invited_by=creator,
        expires_at=LATER,
        meta={"schema_version": "1"},
    )
    invitation.roles.set(roles[:2])
    Invitation.objects.create(  # no roles, no inviter; expired, so its status is computed
        workspace=bare, email="old@example.com", scope="workspace", expires_at=LATER - timedelta(days=3650)
    )
    machine = create_service_account(
        workspace, name="ci", roles=roles[:2], tags=["t"], meta={"schema_version": "1"}, actor=None
    )
    create_key(machine, name="live", expires_at=LATER, actor=None)
    revoked, _ = create_key(machine, name="gone", actor=None)
    revoke_key(machine, revoked.pk, actor=None)
    create_service_account(bare, name="bare", roles=[], tags=[], meta={}, enabled=False, actor=None)
    Passkey.objects.create(account=account, credential_id="a1", public_key=b"k", name="laptop")
    Passkey.objects.create(
        account=creator, credential_id="b2", public_key=b"k", name="phone", backed_up=True, last_used_at=LATER
    )
    read = {
        model: list(model.objects.prefetch_related(*PREFETCH.get(model, [])).order_by("pk"))
        for model in (
            Account,
            Workspace,
            Project,
            Permission,
            Role,
            Membership,
            Credential,
            Session,
            Client,
            Invitation,
            ServiceAccount,
            ServiceAccountKey,
            Passkey,
        )
    }
    by_pk = {client.pk: client.secret for client in made}
    for client in read[Client]:
        client.secret = by_pk.get(client.pk)  # not a column: the plaintext `ClientWithSecret` shows once
    read[Client] = [client for client in read[Client] if client.secret] + made  # also as the factory made it
    read[Membership] += list(Membership.objects.order_by("pk"))  # no prefetch: the relations are queried
    return read


def drf(serializer_class, instance) -> dict:
    """What DRF's own `to_representation` gives, for the record and every nested record."""
    original = ResourceSerializer.to_representation
    ResourceSerializer.to_representation = serializers.ModelSerializer.to_representation
    try:
        return serializer_class(instance).data
    finally:
        ResourceSerializer.to_representation = original


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
                assert issubclass(value, ResourceSerializer), value


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
        lambda: Membership.objects.prefetch_related("roles__permissions").get(),
        # As a list page reads them: the rows in plain lists (`iam.http.serializers.prefetch`), no manager
        # each.
        lambda: Membership.objects.prefetch_related(prefetch("roles"), prefetch("roles__permissions")).get(),
    ],
    ids=["prefetch_related", "prefetch"],
)
def test_a_membership_read_with_its_roles_is_written_without_a_query(load, django_assert_num_queries):
    """What was read with the membership is all its answer needs: its columns, its roles and their
    permissions are written without another query, exactly as DRF's own serializer writes them."""
    role = RoleFactory(permissions=["a:b", "c:d"])
    MembershipFactory(workspace=role.workspace, roles=[role])
    membership = load()
    with django_assert_num_queries(0):
        data = rbac.serializers.MembershipSerializer(membership).data
    assert sorted(p["name"] for p in data["roles"][0]["permissions"]) == ["a:b", "c:d"]  # a set: no order
    drf_data = drf(rbac.serializers.MembershipSerializer, membership)
    for written in (data, drf_data):
        written["roles"][0]["permissions"].sort(key=lambda permission: permission["name"])
    assert data == drf_data
