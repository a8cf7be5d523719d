"""Writes to workspaces and projects. Creating a workspace also makes its owner, which is RBAC's business:
see `rbac.services.create_workspace`."""

from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.models import Account
from iam import audit, events
from iam.errors import ApiError
from iam.service_helpers import UNSET, Unset, apply_changes, check_unique, save_unique, sent

from .models import Project, Workspace
from .workspace_cache import forget_authorization, forget_workspace

WORKSPACE_FIELDS = ("name", "description", "config", "tags", "meta")
PROJECT_FIELDS = ("name", "code", "description", "config", "tags", "meta")


def _member_ids(memberships) -> list:
    return list(memberships.values_list("account_id", flat=True).distinct())


@transaction.atomic
def update_workspace(
    workspace: Workspace,
    *,
    name: str | Unset = UNSET,
    description: str | Unset | None = UNSET,
    config: dict[str, Any] | Unset = UNSET,
    tags: list[str] | Unset = UNSET,
    meta: dict[str, Any] | Unset = UNSET,
    actor: Account | None,
) -> Workspace:
    changes = sent(name=name, description=description, config=config, tags=tags, meta=meta)
    audit.record_update(
        "workspace.update",
        resource=("workspace", workspace.pk),
        workspace_id=workspace.pk,
        changes=audit.diff(workspace, changes, WORKSPACE_FIELDS),
        actor=actor,
    )
    fields = apply_changes(workspace, changes, fields=WORKSPACE_FIELDS)
    workspace.save(update_fields=fields)
    forget_workspace(workspace)
    events.emit(
        "workspace.updated",
        resource=("workspace", workspace.pk),
        account_ids=[],
        workspace_ids=[workspace.pk],
    )
    return workspace


@transaction.atomic
def delete_workspace(workspace: Workspace, *, actor: Account | None) -> dict:
    """CONTRACT 6: takes its projects, roles, permissions, memberships, credentials and clients."""
    if workspace.slug == settings.IAM_ROOT_WORKSPACE:
        raise ApiError(400, "the root workspace cannot be deleted")
    summary = {"id": str(workspace.pk), "slug": workspace.slug, "name": workspace.name}
    audit.record(
        "workspace.delete",
        resource=("workspace", workspace.pk),
        workspace_id=workspace.pk,
        changes=audit.removed(workspace, ("slug", "name")),
        actor=actor,
    )
    events.emit(
        "workspace.deleted",
        resource=("workspace", workspace.pk),
        account_ids=_member_ids(workspace.memberships.all()),
        workspace_ids=[workspace.pk],
    )
    forget_workspace(workspace)  # purged now and again after commit
    forget_authorization(workspace.pk)
    workspace.delete()
    return summary


@transaction.atomic
def create_project(
    workspace: Workspace,
    *,
    name: str,
    config: dict,
    tags: list[str],
    meta: dict,
    code: str | None = None,
    description: str | None = None,
    actor: Account | None,
) -> Project:
    check_unique(Project.objects.in_workspace(workspace), name=name, code=code)
    project = Project(
        workspace=workspace,
        name=name,
        code=code,
        description=description,
        config=config,
        tags=tags,
        meta=meta,
        created_by=actor,
    )
    save_unique(
        project,
        conflict="name or code already exists",
        field="name",
        check=lambda: check_unique(Project.objects.in_workspace(workspace), name=name, code=code),
        force_insert=True,
    )
    audit.record(
        "project.create",
        resource=("project", project.pk),
        workspace_id=workspace.pk,
        changes=audit.created(project, ("name", "code", "description", "tags")),
        actor=actor,
    )
    return project


@transaction.atomic
def update_project(
    project: Project,
    *,
    name: str | Unset = UNSET,
    new_code: str | Unset | None = UNSET,
    description: str | Unset | None = UNSET,
    config: dict[str, Any] | Unset = UNSET,
    tags: list[str] | Unset = UNSET,
    meta: dict[str, Any] | Unset = UNSET,
    actor: Account | None,
) -> Project:
    changes = sent(name=name, code=new_code, description=description, config=config, tags=tags, meta=meta)

    def check() -> None:
        check_unique(
            Project.objects.in_workspace(project.workspace),
            exclude=project.pk,
            name=changes.get("name"),
            code=changes.get("code"),
        )

    check()
    audit.record_update(
        "project.update",
        resource=("project", project.pk),
        workspace_id=project.workspace_id,
        changes=audit.diff(project, changes, PROJECT_FIELDS),
        actor=actor,
    )
    fields = apply_changes(project, changes, fields=PROJECT_FIELDS)
    save_unique(
        project, conflict="name or code already exists", field="name", check=check, update_fields=fields
    )
    return project


@transaction.atomic
def delete_project(project: Project, *, actor: Account | None) -> dict:
    """CONTRACT 6: takes its project-scope memberships, whose accounts lose what they granted."""
    summary = {"id": str(project.pk), "name": project.name, "code": project.code}
    audit.record(
        "project.delete",
        resource=("project", project.pk),
        workspace_id=project.workspace_id,
        changes=audit.removed(project, ("name", "code")),
        actor=actor,
    )
    events.emit(
        "project.deleted",
        resource=("project", project.pk),
        account_ids=_member_ids(project.memberships.all()),
        workspace_ids=[project.workspace_id],
    )
    forget_authorization(project.workspace_id)
    project.delete()
    return summary
