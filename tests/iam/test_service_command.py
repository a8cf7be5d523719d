"""`iam.platform.service_helpers.ServiceCommand`: what a command changes through the services commits together
and is recorded as the command's, and a service's refusal is the command's error, taking back what came
before it."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from iam.http.errors import ApiError
from iam.models import AuditEntry
from iam.platform.service_helpers import ServiceCommand
from tenancy.models import Workspace
from tenancy.services import update_workspace
from tests.factories import WorkspaceFactory

pytestmark = pytest.mark.django_db


class Rename(ServiceCommand):
    required = ("--slug", "--name")

    def run(self, *, slug: str, name: str, **options):
        update_workspace(Workspace.objects.get(slug=slug), name=name, actor=None)
        if name == "Refused":
            raise ApiError(400, "refused by the service")


def test_the_changes_are_recorded_as_the_command_s():
    workspace = WorkspaceFactory(slug="renamed", name="Before")
    call_command(Rename(), "--slug", "renamed", "--name", "After")
    workspace.refresh_from_db()
    assert workspace.name == "After"
    entry = AuditEntry.objects.get(action="workspace.update", resource_id=str(workspace.pk))
    assert entry.actor_kind == "command"


def test_a_refusal_is_the_command_error_and_takes_back_the_earlier_writes():
    workspace = WorkspaceFactory(slug="kept", name="Before")
    with pytest.raises(CommandError, match="refused by the service"):
        call_command(Rename(), "--slug", "kept", "--name", "Refused")
    workspace.refresh_from_db()
    assert workspace.name == "Before"
    assert not AuditEntry.objects.filter(action="workspace.update", resource_id=str(workspace.pk)).exists()


def test_the_required_options_are_required():
    with pytest.raises(CommandError, match="--name"):
        call_command(Rename(), "--slug", "x")
