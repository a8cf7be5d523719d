"""Workspace resolution for `X-Workspace` (docs/api.md#x-workspace), cached by id and by slug."""

import uuid
from collections.abc import Callable

from django.conf import settings

from iam.platform import cache
from iam.platform.registry import Registry

from .models import Workspace


def _key(ref: str) -> str:
    return f"workspace:{ref}"


# What resolving `X-Workspace` needs (the checks read the id and the MFA policy, the audit scope the slug),
# as a plain tuple in the model's field order, which `Model.from_db` expects of a partial row; other fields
# load on access.
_WANTED = {"id", "name", "slug", "mfa_required"}
CACHED_FIELDS = tuple(field.attname for field in Workspace._meta.concrete_fields if field.attname in _WANTED)
_MFA_REQUIRED = CACHED_FIELDS.index("mfa_required")


def workspace_key(workspace_id) -> str:
    """The entry `find_workspace` reads for a workspace id, for a caller that fetches it with others in
    one round trip (`clients/validate`)."""
    return _key(str(workspace_id))


def find_workspace(ref: str, *, prefetched: object = cache.MISSING) -> Workspace | None:
    """`ref` is a UUID or a slug; `prefetched`: its entry, when the caller fetched it already."""
    values = _cached_values(ref, prefetched)
    return None if values is None else Workspace.from_db("default", CACHED_FIELDS, values)


def requires_mfa(workspace_id: str, *, prefetched: object = cache.MISSING) -> bool | None:
    """The workspace's MFA policy (docs/security.md#second-factors-and-the-workspace-mfa-policy) from the same
    entry as `find_workspace`, without building a model instance (`clients/validate` reads nothing else of
    it); None when the workspace is gone."""
    values = _cached_values(workspace_id, prefetched)
    return None if values is None else values[_MFA_REQUIRED]


def _cached_values(ref: str, prefetched: object) -> tuple | None:
    ref = ref.strip()
    try:
        lookup = {"pk": uuid.UUID(ref)}
        ref = str(lookup["pk"])
    except ValueError:
        lookup = {"slug": ref.lower()}
        ref = ref.lower()
    return cache.read_through(
        _key(ref),
        lambda: Workspace.objects.filter(**lookup).values_list(*CACHED_FIELDS).first(),
        settings.IAM_AUTH_CACHE_SECONDS,
        prefetched=prefetched,
        current_shape=lambda values: isinstance(values, tuple) and len(values) == len(CACHED_FIELDS),
    )


def forget_workspace(workspace: Workspace, *, old_slug: str | None = None) -> None:
    keys = [_key(str(workspace.pk)), _key(workspace.slug)]
    if old_slug:
        keys.append(_key(old_slug))
    cache.around_commit(lambda: cache.delete_many(keys))


def root_workspace() -> Workspace:
    """docs/api.md#the-root-workspace. `bootstrap` gives it its owner role; this only makes sure the row
    exists."""
    workspace = find_workspace(settings.IAM_ROOT_WORKSPACE)
    if workspace is None:
        workspace, _ = Workspace.objects.get_or_create(
            slug=settings.IAM_ROOT_WORKSPACE, defaults={"name": "Root", "config": {"schema_version": "1"}}
        )
    return workspace


def generation_key(workspace_id) -> str:
    return f"authz-generation:{workspace_id}"


def authz_generation(workspace_id, *, prefetched: object = cache.MISSING) -> int:
    """A stamp that every cached authorization answer of the workspace carries; bumping it drops them all
    at once. A lost key (eviction, cache restart) starts a fresh, never-used generation. `prefetched` is the
    value a caller already fetched (with `cache.get_many`)."""
    key = generation_key(workspace_id)
    generation = cache.get(key) if prefetched is cache.MISSING else prefetched
    if generation is cache.MISSING or generation is None:
        generation = cache.new_generation()
        cache.set(key, generation, None)
    return generation


def forget_authorization(workspace_id) -> None:
    """Call inside the transaction that changes who may do what in the workspace. Dropping the generation
    drops every grant cached under it: the next read starts a new one."""
    key = generation_key(workspace_id)
    cache.around_commit(lambda: cache.delete_many([key]))


# What the apps above cache of a workspace's records, which its delete takes with it in one cascade: each
# registers, beside its cache, what purges one workspace's entries (`@purge_on_delete("clients")` in
# clients/client_cache.py). `delete_workspace` runs every one inside its transaction, before the cascade,
# as the records' own deletes do.
WorkspacePurge = Callable[[Workspace], None]
_purges: Registry[WorkspacePurge] = Registry()
purge_on_delete = _purges.register


def forget_records(workspace: Workspace) -> None:
    """Call inside the transaction that deletes the workspace."""
    for purge in _purges.values():
        purge(workspace)
