"""One role given to many memberships and taken from many others at once: what a directory's Group
change asks (a PATCH of a thousand members). The rules are `update_membership`'s with `roles` (the
escalation rule, the roles-per-membership quota, one audit entry and one `membership.updated` event per
membership changed, the workspace's cached grants dropped), written in a few statements for them all
rather than a dozen per membership (`audit.record_each`, `events.emit_each`)."""

from collections import defaultdict
from collections.abc import Iterator

from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from iam.platform import audit, events
from rbac import policy
from rbac.models import Membership, Role
from rbac.services.memberships import _check_roles_per_membership, granted_by
from tenancy.workspace_cache import forget_authorization

AT_ONCE = 5_000  # rows or ids per statement: PostgreSQL takes at most 65,535 parameters


def chunks(items: list) -> Iterator[list]:
    """`items` in lists of at most AT_ONCE, each short enough for one statement's `IN (...)`."""
    for start in range(0, len(items), AT_ONCE):
        yield items[start : start + AT_ONCE]


@transaction.atomic
def change_holders(
    role: Role, *, adding: list[Membership], removing: list[Membership], actor: Account | None
) -> None:
    """`role` added to the memberships `adding` and taken from those in `removing`: memberships of the
    role's workspace, locked by the caller, their roles prefetched (`prefetch_related("roles")`); one that
    already holds the role (or, removing, does not) is left as it is."""
    held = {membership.pk: list(membership.roles.all()) for membership in [*adding, *removing]}
    adding = [each for each in adding if all(other.pk != role.pk for other in held[each.pk])]
    removing = [each for each in removing if any(other.pk == role.pk for other in held[each.pk])]
    if not adding and not removing:
        return
    after = {each.pk: [*held[each.pk], role] for each in adding}
    after |= {each.pk: [other for other in held[each.pk] if other.pk != role.pk] for each in removing}
    changed = [*adding, *removing]
    for membership in adding:
        _check_roles_per_membership(after[membership.pk], actor=actor)
    by_project: dict = defaultdict(set)  # the escalation rule, as update_membership weighs each result
    for membership in changed:
        by_project[membership.project_id].update(after[membership.pk])
    for project_id, roles in by_project.items():
        policy.require_grantable(actor, role.workspace_id, granted_by(roles), project_id=project_id)
    holding = Membership.roles.through
    holding.objects.bulk_create(
        [holding(membership_id=each.pk, role_id=role.pk) for each in adding], batch_size=AT_ONCE
    )
    for chunk in chunks([each.pk for each in removing]):
        holding.objects.filter(role_id=role.pk, membership_id__in=chunk).delete()
    now = timezone.now()
    for chunk in chunks([each.pk for each in changed]):
        Membership.objects.filter(pk__in=chunk).update(updated_at=now)
    audit.record_each(
        "membership.update",
        [
            (("membership", each.pk), {"role_ids": _ids_change(held[each.pk], after[each.pk])})
            for each in changed
        ],
        workspace_id=role.workspace_id,
        actor=actor,
    )
    forget_authorization(role.workspace_id)
    events.emit_each(
        "membership.updated",
        [(("membership", each.pk), [each.account_id]) for each in changed],
        workspace_id=role.workspace_id,
    )


def _ids_change(before: list[Role], after: list[Role]) -> dict:
    return {
        "before": sorted(str(each.pk) for each in before),
        "after": sorted(str(each.pk) for each in after),
    }
