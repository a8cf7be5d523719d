"""Writes to workspaces and projects. Creating a workspace also makes its owner, which is RBAC's business:
see `rbac.services.workspaces.create_workspace`."""

from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.models import Account, account_of
from iam.http.errors import ApiError
from iam.platform import audit, events
from iam.platform.service_helpers import UNSET, apply_changes, save_unique, sent

from .models import Project, Workspace
from .quotas import check_quota
from .workspace_cache import forget_authorization, forget_records, forget_workspace


def _member_ids(memberships) -> list:
    return list(memberships.values_list("account_id", flat=True).distinct())


# What a workspace holds that decides who is authorized there: a change to any of them concerns every
# account with an active membership (`workspace.updated` names them all, docs/integration.md#push-events).
AUTHORIZING_FIELDS = frozenset({"mfa_required"})


@transaction.atomic
def update_workspace(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str = UNSET,
    description: str | None = UNSET,
    config: dict[str, Any] = UNSET,
    mfa_required: bool = UNSET,
    branding: dict[str, str] = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Workspace:
    changes = sent(
        name=name,
        description=description,
        config=config,
        mfa_required=mfa_required,
        branding=branding if branding is UNSET else Workspace.normalized_branding(branding),
        tags=tags,
        meta=meta,
    )
    entry = audit.diff(workspace, changes)
    workspace.save(update_fields=apply_changes(workspace, changes))
    if entry:
        audit.record(
            "workspace.update",
            resource=("workspace", workspace.pk),
            workspace_id=workspace.pk,
            changes=entry,
            actor=actor,
        )
    forget_workspace(workspace)
    concerned = AUTHORIZING_FIELDS.intersection(entry)
    events.emit(
        "workspace.updated",
        resource=("workspace", workspace.pk),
        # "active": rbac's `Membership.Status.ACTIVE`, through the reverse relation (tenancy is below rbac)
        account_ids=_member_ids(workspace.memberships.filter(status="active")) if concerned else [],
        workspace_ids=[workspace.pk],
    )
    return workspace


@transaction.atomic
def delete_workspace(workspace: Workspace, *, actor: Account | None) -> dict:
    """docs/api.md#validation: takes its projects, roles, permissions, memberships, credentials and
    clients."""
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
    forget_records(workspace)  # its clients stop validating at once, as `clients/delete` has them
    workspace.delete()
    return summary


@transaction.atomic
def create_project(
    workspace: Workspace,
    *,
    actor: Account | None,
    name: str,
    config: dict[str, Any],
    tags: list[str],
    meta: dict[str, Any],
    code: str | None = None,
    description: str | None = None,
) -> Project:
    peers = Project.objects.in_workspace(workspace)
    check_quota("projects", settings.IAM_QUOTA_PROJECTS, actor=actor, records=peers, owner=workspace)
    project = Project(
        workspace=workspace,
        created_by=account_of(actor),
        name=name,
        code=code,
        description=description,
        config=config,
        tags=tags,
        meta=meta,
    )
    save_unique(project, peers, {"name": name, "code": code}, force_insert=True)
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
    actor: Account | None,
    name: str = UNSET,
    new_code: str | None = UNSET,  # the API's name for `code` (docs/api.md#projects)
    description: str | None = UNSET,
    config: dict[str, Any] = UNSET,
    tags: list[str] = UNSET,
    meta: dict[str, Any] = UNSET,
) -> Project:
    changes = sent(name=name, code=new_code, description=description, config=config, tags=tags, meta=meta)
    entry = audit.diff(project, changes)
    fields = apply_changes(project, changes)
    peers = Project.objects.in_workspace(project.workspace_id)
    save_unique(
        project, peers, {"name": changes.get("name"), "code": changes.get("code")}, update_fields=fields
    )
    if entry:
        audit.record(
            "project.update",
            resource=("project", project.pk),
            workspace_id=project.workspace_id,
            changes=entry,
            actor=actor,
        )
    return project


@transaction.atomic
def delete_project(project: Project, *, actor: Account | None) -> dict:
    """docs/api.md#validation: takes its project-scope memberships, whose accounts lose what they granted."""
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
