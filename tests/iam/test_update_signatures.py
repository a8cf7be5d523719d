"""The services take each field as a keyword-only argument, so a misspelled field is a TypeError at the
call site (it used to vanish in a `changes` dict filtered by the service); in an update a keyword left out
is not sent (`UNSET`), None sets null."""

import pytest

from accounts.services import update_account
from authn.credentials import update_credential
from clients.services import create_client, update_client
from iam.platform.service_helpers import UNSET, sent
from rbac.services.memberships import update_membership
from rbac.services.permissions import create_permission, update_permission
from rbac.services.roles import update_role
from tenancy.services import update_project, update_workspace
from tests.factories import (
    AccountFactory,
    CredentialFactory,
    MembershipFactory,
    PermissionFactory,
    ProjectFactory,
    RoleFactory,
    WorkspaceFactory,
)

pytestmark = pytest.mark.django_db


def _client(workspace):
    client, _ = create_client(workspace, name="app", description="before", tags=[], meta={}, actor=None)
    return client


# (the service, a record factory, the misspelled keyword, the right one, the field, a new value)
CASES = [
    (update_account, AccountFactory, "descripton", "description", "description", "after"),
    (update_workspace, WorkspaceFactory, "descripton", "description", "description", "after"),
    (update_project, ProjectFactory, "code", "new_code", "code", "after"),  # the API's rename
    (update_permission, PermissionFactory, "descripton", "description", "description", "after"),
    (update_role, RoleFactory, "descripton", "description", "description", "after"),
    (update_membership, MembershipFactory, "stauts", "status", "status", "suspended"),
    (update_client, lambda: _client(WorkspaceFactory()), "descripton", "description", "description", "after"),
]


@pytest.mark.parametrize(
    ("service", "make", "wrong", "right", "field", "value"),
    CASES,
    ids=lambda case: getattr(case, "__name__", None),
)
def test_misspelled_keyword_fails(service, make, wrong, right, field, value, operator):
    record = make()
    before = getattr(record, field)
    assert before != value
    with pytest.raises(TypeError, match=wrong):
        service(record, **{wrong: value}, actor=operator)
    record.refresh_from_db()
    assert getattr(record, field) == before
    service(record, **{right: value}, actor=operator)
    record.refresh_from_db()
    assert getattr(record, field) == value


def test_misspelled_credential_keyword_fails():
    credential = CredentialFactory()
    with pytest.raises(TypeError, match="provider_id"):
        update_credential(credential, provider_id="renamed")  # the API's rename is `new_provider_id`
    with pytest.raises(TypeError, match="actor"):
        update_credential(credential, actor=None)  # no actor: the request's is recorded
    credential.refresh_from_db()
    assert credential.provider_id is None


def test_none_sets_null_and_unset_keeps(operator):
    workspace = WorkspaceFactory(description="kept", name="Before")
    update_workspace(workspace, name="After", actor=operator)
    workspace.refresh_from_db()
    assert (workspace.name, workspace.description) == ("After", "kept")
    update_workspace(workspace, description=None, actor=operator)
    workspace.refresh_from_db()
    assert (workspace.name, workspace.description) == ("After", None)


def test_sent_keeps_what_was_sent_none_included():
    assert sent(name="n", code=None, description=UNSET) == {"name": "n", "code": None}


def test_a_create_service_refuses_a_misspelled_field_and_requires_the_required_ones(operator):
    workspace = WorkspaceFactory()
    with pytest.raises(TypeError, match="'descripton'"):
        create_permission(workspace, name="a:b", descripton="x", tags=[], meta={}, actor=operator)
    with pytest.raises(TypeError, match="'meta'"):
        create_permission(workspace, name="a:b", tags=[], actor=operator)
    permission = create_permission(workspace, name="a:b", tags=[], meta={}, actor=operator)
    assert (permission.name, permission.code, permission.description) == ("a:b", None, None)
