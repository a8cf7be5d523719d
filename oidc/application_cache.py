"""The application as the protocol's endpoints read it (docs/oidc.md#applications), cached as clients are
(clients/client_cache.py): a warm token request reads no application row. The entry is a plain tuple of
the fields the protocol reads, its secret as the keyed digest only. Every write that changes or deletes
an application purges its entry around the commit, and Redis reports the change to every process's
memory (docs/performance.md#what-keeps-the-hot-paths-fast); with the cache down, the database answers."""

from uuid import UUID

from django.conf import settings

from iam.platform import cache
from tenancy.models import Workspace
from tenancy.workspace_cache import purge_on_delete

from .models import Application

UNKNOWN_APPLICATION_SECONDS = 30
# In the model's field order, which `Model.from_db` expects of a partial row.
CACHED_FIELDS = tuple(
    field.attname
    for field in Application._meta.concrete_fields
    if field.attname
    in {
        "id",
        "workspace_id",
        "name",
        "type",
        "redirect_uris",
        "post_logout_redirect_uris",
        "grant_types",
        "service_account_id",
        "first_party",
        "secret_digest",
    }
)
LISTS = frozenset({"redirect_uris", "post_logout_redirect_uris", "grant_types"})


def application_key(application_id: UUID | str) -> str:
    return f"application:{application_id}"


def find_application(application_id: UUID) -> Application | None:
    """The application with CACHED_FIELDS loaded (any other field loads on access, from the database),
    or None when there is none."""
    values = cache.read_through(
        application_key(application_id),
        lambda: _load(application_id),
        settings.IAM_AUTH_CACHE_SECONDS,
        current_shape=_fits,
        absent_timeout=UNKNOWN_APPLICATION_SECONDS,
    )
    if values is None:
        return None
    row = [list(value) if name in LISTS else value for name, value in zip(CACHED_FIELDS, values, strict=True)]
    return Application.from_db("default", CACHED_FIELDS, row)


def _load(application_id: UUID) -> tuple | None:
    row = Application.objects.filter(pk=application_id).values_list(*CACHED_FIELDS).first()
    if row is None:
        return None
    # tuples, not lists: an entry of immutable values is decoded once per process, not on every read
    return tuple(
        tuple(value) if name in LISTS else value for name, value in zip(CACHED_FIELDS, row, strict=True)
    )


def _fits(values: object) -> bool:
    return type(values) is tuple and len(values) == len(CACHED_FIELDS)


def forget_application(application_id: UUID | str) -> None:
    """Call inside the transaction that changes or deletes the application."""
    cache.around_commit(lambda: cache.delete_many([application_key(application_id)]))


@purge_on_delete("applications")
def forget_workspace_applications(workspace: Workspace) -> None:
    """A deleted workspace takes its applications in its cascade: each is refused when that commits."""
    keys = [
        application_key(pk)
        for pk in Application.objects.filter(workspace=workspace).values_list("pk", flat=True)
    ]
    if keys:
        cache.around_commit(lambda: cache.delete_many(keys))
