"""`rbac.api.RecordEndpoint.handle`, written once for every endpoint that loads a record, calls its
service and answers the result: what the declared service receives and what the endpoint answers."""

from types import SimpleNamespace

import pytest

from iam.errors import ApiError
from rbac.api import RecordEndpoint
from tenancy import services
from tenancy.models import Project
from tenancy.serializers import ProjectRef, ProjectSerializer


class ProjectEndpoint(RecordEndpoint):
    """A project endpoint declared on the base (the served project endpoints, tenancy/api.py, are written
    out and no longer use it)."""

    model = Project
    project_aware = True
    ref = ProjectRef
    response_serializer = ProjectSerializer


@pytest.fixture
def project(root, operator) -> Project:
    return services.create_project(
        root, name="Apollo", code="apollo", config={}, tags=[], meta={}, actor=operator
    )


@pytest.fixture
def handle(root, operator):
    """Runs an endpoint class's `handle` for the operator in the root workspace, past the permission
    check (which tests/rbac/test_policy_table.py covers)."""

    def run(endpoint_class, data: dict):
        endpoint = endpoint_class()
        endpoint.request = SimpleNamespace(user=operator, workspace=root)
        return endpoint.handle(endpoint.request, data)

    return run


def recording(calls: list, answer):
    def service(target, **kwargs):
        calls.append((target, kwargs))
        return answer(target) if callable(answer) else answer

    return service


def test_without_a_service_it_answers_the_record_the_lookup_names(handle, project):
    class Describe(ProjectEndpoint):
        permission = "projects:describe"

    assert handle(Describe, {"code": "apollo"})["id"] == str(project.pk)
    with pytest.raises(ApiError) as refused:
        handle(Describe, {"code": "nobody"})
    assert (refused.value.status, refused.value.message) == (404, "project not found")


def test_an_update_service_gets_the_record_the_changes_and_the_caller(handle, project, operator):
    calls = []

    class Update(ProjectEndpoint):
        permission = "projects:update"
        service = recording(calls, lambda record: record)

    answer = handle(Update, {"code": "apollo", "name": "Artemis", "tags": ["x"]})
    # The lookup key (`code`) names the record; it is not a change.
    assert calls == [(project, {"name": "Artemis", "tags": ["x"], "actor": operator})]
    assert answer["id"] == str(project.pk) and answer["code"] == "apollo"


def test_a_create_service_gets_the_workspace_and_the_whole_body(handle, root, operator):
    calls = []

    class Create(ProjectEndpoint):
        permission = "projects:create"
        creates = True
        service = recording(calls, {"made": True})

    # A summary (not a record) is the answer as it is.
    assert handle(Create, {"code": "new", "name": "New"}) == {"made": True}
    assert calls == [(root, {"code": "new", "name": "New", "actor": operator})]
