"""The admin lists what the API lists: its field lists come from the API serializers."""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.test import RequestFactory

from accounts.models import Account
from accounts.serializers import AccountSerializer
from authn.models import Credential
from authn.serializers import CredentialSerializer
from clients.models import Client
from clients.serializers import ClientSerializer
from iam.admin import api_fields
from rbac.models import Membership, Permission, Role
from rbac.serializers import MembershipSerializer, PermissionSerializer, RoleSerializer
from tenancy.models import Project, Workspace
from tenancy.serializers import ProjectSerializer, WorkspaceSerializer

SHOWN = [
    (Account, AccountSerializer),
    (Workspace, WorkspaceSerializer),
    (Project, ProjectSerializer),
    (Permission, PermissionSerializer),
    (Role, RoleSerializer),
    (Membership, MembershipSerializer),
    (Client, ClientSerializer),
    (Credential, CredentialSerializer),
]


@pytest.mark.parametrize(("model", "serializer"), SHOWN, ids=lambda value: value.__name__)
def test_a_records_page_shows_every_field_the_api_shows(model, serializer):
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/")
    shown = flatten_fieldsets(model_admin.get_fieldsets(request, model()))
    assert set(api_fields(serializer)) - set(shown) == set()


def test_api_fields_names_relations_as_the_admin_does():
    assert api_fields(CredentialSerializer)[:3] == ("id", "account", "workspace")
    assert "provider_id" in api_fields(CredentialSerializer)  # a column, not a relation
    assert api_fields(ClientSerializer).count("workspace") == 1  # `workspace` and `workspace_id`
    assert api_fields(MembershipSerializer)[:4] == ("id", "account", "workspace", "project")
