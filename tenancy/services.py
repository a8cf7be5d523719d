"""Writes to workspaces and projects. Creating a workspace also makes its owner, which is RBAC's business:
see `rbac.services.create_workspace`."""

from typing import Any, NotRequired, Unpack

from django.conf import settings
from django.db import transaction

from accounts.models import Account
from iam import audit, events
from iam.errors import ApiError
from iam.service_helpers import Described, NewResource, renamed, save_changes, save_new, strict

from .models import Project, Workspace
from .quotas import check_quota
from .workspace_cache import forget_authorization, forget_records, forget_workspace

WORKSPACE_FIELDS = ("name", "description", "config", "mfa_required", "tags", "meta")
PROJECT_FIELDS = ("name", "code", "description", "config", "tags", "meta")


class NewProject(NewResource):
    config: dict[str, Any]
    code: NotRequired[str | None]


class WorkspaceChanges(Described, total=False):
    config: dict[str, Any]
    mfa_required: bool


class ProjectChanges(Described, total=False):
    config: dict[str, Any]
    new_code: str | None  # the API's name for `code` (SPEC 4)


def _member_ids(memberships) -> list:
    return list(memberships.values_list("account_id", flat=True).distinct())


@strict
@transaction.atomic
def update_workspace(
    workspace: Workspace, *, actor: Account | None, **changes: Unpack[WorkspaceChanges]
) -> Workspace:
    save_changes(workspace, changes, fields=WORKSPACE_FIELDS, actor=actor)
    forget_workspace(workspace)
    events.emit_for(workspace, "updated", account_ids=[])
    return workspace


@transaction.atomic
def delete_workspace(workspace: Workspace, *, actor: Account | None) -> dict:
    """CONTRACT 6: takes its projects, roles, permissions, memberships, credentials and clients."""
    if workspace.slug == settings.IAM_ROOT_WORKSPACE:
        raise ApiError(400, "the root workspace cannot be deleted")
    summary = {"id": str(workspace.pk), "slug": workspace.slug, "name": workspace.name}
    audit.record_for(workspace, "delete", changes=audit.removed(workspace, ("slug", "name")), actor=actor)
    events.emit_for(workspace, "deleted", account_ids=_member_ids(workspace.memberships.all()))
    forget_workspace(workspace)  # purged now and again after commit
    forget_authorization(workspace.pk)
    forget_records(workspace)  # its clients stop validating at once, as `clients/delete` has them
    workspace.delete()
    return summary


@strict
@transaction.atomic
def create_project(workspace: Workspace, *, actor: Account | None, **fields: Unpack[NewProject]) -> Project:
    check_quota(
        "projects",
        settings.IAM_QUOTA_PROJECTS,
        actor=actor,
        records=Project.objects.in_workspace(workspace),
        owner=workspace,
    )
    project = Project(workspace=workspace, created_by=actor, **fields)
    save_new(project, audited=("name", "code", "description", "tags"), actor=actor, unique=("name", "code"))
    return project


@strict
@transaction.atomic
def update_project(project: Project, *, actor: Account | None, **changes: Unpack[ProjectChanges]) -> Project:
    save_changes(
        project,
        renamed(changes, new_code="code"),
        fields=PROJECT_FIELDS,
        actor=actor,
        unique=("name", "code"),
    )
    return project


@transaction.atomic
def delete_project(project: Project, *, actor: Account | None) -> dict:
    """CONTRACT 6: takes its project-scope memberships, whose accounts lose what they granted."""
    summary = {"id": str(project.pk), "name": project.name, "code": project.code}
    audit.record_for(project, "delete", changes=audit.removed(project, ("name", "code")), actor=actor)
    events.emit_for(project, "deleted", account_ids=_member_ids(project.memberships.all()))
    forget_authorization(project.workspace_id)
    project.delete()
    return summary
