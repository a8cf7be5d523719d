"""What the services share. An update service takes each field as a keyword-only argument whose default
is `UNSET` ("not sent"): `sent()` keeps the ones the caller sent (docs/api.md#validation: only what is sent
changes; None sets null) and `apply_changes` sets them. `save_unique` and `unique_conflict` answer the
docs/api.md#validation 409 when a uniqueness race gets past the service's check. `ServiceCommand` runs a
management command through the services."""

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from iam.http.errors import ApiError
from iam.platform.context import as_command


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()  # the default of an update service's field: the caller did not send it


def uuid_or_none(value: object) -> UUID | None:
    """`value` as a UUID, or None when it is none (not a string, or not a UUID's spelling)."""
    try:
        return UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None


def sent(**fields: Any) -> dict[str, Any]:
    """The fields the caller sent (not `UNSET`), by name."""
    return {name: value for name, value in fields.items() if value is not UNSET}


def apply_changes(instance: models.Model, changes: Mapping[str, Any]) -> list[str]:
    """Sets the changed fields (`tags` replaces) and `updated_at`. Returns the names to pass to
    `save(update_fields=...)`."""
    for name, value in changes.items():
        setattr(instance, name, value)
    instance.updated_at = timezone.now()
    return [*changes, "updated_at"]


def check_unique(queryset: models.QuerySet, *, exclude: Any = None, **values: Any) -> None:
    """409 `<field> already exists` (docs/api.md#validation) when another record of `queryset`, already scoped
    to the workspace, holds one of the given values. None values are not compared (optional codes, unsent
    fields)."""
    others = queryset.exclude(pk=exclude) if exclude is not None else queryset
    for field, value in values.items():
        if value is not None and others.filter(**{field: value}).exists():
            raise ApiError(409, f"{field} already exists", field)


def save_unique(
    instance: models.Model, peers: models.QuerySet, unique: Mapping[str, Any], **save_kwargs: Any
) -> None:
    """Saves `instance` unless another record of `peers` (its workspace's, or the table's) holds one of
    the `unique` values: checked first, and again when a race past the check breaks the unique constraint
    (`unique_conflict`), so the answer names the very field that conflicts."""
    names = list(unique)

    def check() -> None:
        check_unique(peers, exclude=instance.pk, **unique)

    check()
    with unique_conflict(f"{' or '.join(names)} already exists", names[0], check=check):
        instance.save(**save_kwargs)


@contextmanager
def unique_conflict(
    conflict: str, field: str | None = None, *, check: Callable[[], None] | None = None, status: int = 409
) -> Iterator[None]:
    """Runs the block's writes in a savepoint, turning a uniqueness race the earlier check could not see
    into the answer that check would have given (docs/api.md#validation): the transaction survives the
    IntegrityError, and `check`, run again, sees the row that won the race (committed by now: under READ
    COMMITTED each query sees the latest commits) and words the answer exactly. `conflict` and `field`
    are the answer when it cannot tell."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        if check is not None:
            check()
        raise ApiError(status, conflict, field) from exc


class ServiceCommand(BaseCommand):
    """A management command that writes through the services: `run(**options)` runs in one transaction,
    its changes recorded with actor kind `command`, and a service's refusal (an ApiError) is the
    command's error. `required` names its required options."""

    required: ClassVar[tuple[str, ...]] = ()

    def add_arguments(self, parser: Any) -> None:
        for option in self.required:
            parser.add_argument(option, required=True)

    @as_command
    def handle(self, *args: Any, **options: Any) -> None:
        try:
            with transaction.atomic():
                self.run(**options)
        except ApiError as exc:
            raise CommandError(exc.message) from exc

    def run(self, **options: Any) -> None:
        raise NotImplementedError


def resolve(queryset: QuerySet, ids: Iterable[UUID], *, field: str) -> list:
    """The records of `queryset` (scoped to the workspace) that `ids` name; any other id is a 400 naming the
    request field (docs/api.md#validation), whether it is unknown or belongs to another workspace."""
    ids = list(dict.fromkeys(ids))
    found = list(queryset.filter(pk__in=ids))
    if len(found) != len(ids):
        noun = queryset.model._meta.verbose_name
        raise ApiError(400, f"{field} must name {noun}s of this workspace", field)
    return found
