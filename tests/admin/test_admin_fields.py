"""The admin lists what the API lists: its field lists come from the API serializers."""

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.test import RequestFactory
from django.urls import reverse

from accounts.models import Account
from accounts.serializers import AccountSerializer
from authn.models import Credential
from authn.serializers import CredentialSerializer
from clients.models import Client
from clients.serializers import ClientSerializer
from iam.http.admin import api_fields
from rbac.models import Membership, Permission, Role
from rbac.serializers import MembershipSerializer, PermissionSerializer, RoleSerializer
from tenancy.models import Project, Workspace
from tenancy.serializers import ProjectSerializer, WorkspaceSerializer
from tests.factories import MembershipFactory, PermissionFactory, RoleFactory

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


def test_a_roles_page_offers_its_workspaces_permissions_in_two_lists(admin_web):
    role = RoleFactory()
    own = PermissionFactory(workspace=role.workspace, name="projects:read")
    PermissionFactory(name="projects:read")  # another workspace's, of the same name
    response = admin_web.get(reverse("admin:rbac_role_change", args=[role.pk]))
    field = response.context["adminform"].form.fields["permissions"]
    assert list(field.queryset) == [own]
    assert field.label_from_instance(own) == f"{role.workspace.slug}: projects:read"
    assert isinstance(field.widget, FilteredSelectMultiple)  # no add-another wrapper around it


def test_a_membership_lists_the_consent_time_read_only(admin_web):
    membership = MembershipFactory()
    response = admin_web.get(reverse("admin:rbac_membership_change", args=[membership.pk]))
    assert "accepted_at" in response.context["adminform"].readonly_fields
    assert "accepted_at" not in response.context["adminform"].form.fields
