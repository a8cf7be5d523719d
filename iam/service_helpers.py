from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import Any, Final

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from iam.errors import ApiError


class Unset(Enum):
    """The type of `UNSET`: an update service's default for "not sent", so that None can mean "set to
    null" (SPEC 1: only what is sent changes)."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET


def sent(**values: Any) -> dict[str, Any]:
    """The keyword arguments an update service was given, without those left `UNSET`."""
    return {name: value for name, value in values.items() if value is not UNSET}


def apply_changes(instance: models.Model, changes: Mapping[str, Any], *, fields: Iterable[str]) -> list[str]:
    """Sets the given fields (update semantics of SPEC 1: only what is sent changes; `tags` replaces)
    and `updated_at`. Returns the names to pass to `save(update_fields=...)`."""
    changed = [name for name in fields if name in changes]
    for name in changed:
        setattr(instance, name, changes[name])
    instance.updated_at = timezone.now()
    return [*changed, "updated_at"]


def check_unique(queryset: models.QuerySet, *, exclude: Any = None, **values: Any) -> None:
    """409 `<field> already exists` (CONTRACT 12) when another record of `queryset`, already scoped to the
    workspace, holds one of the given values. None values are not compared (optional codes)."""
    others = queryset.exclude(pk=exclude) if exclude is not None else queryset
    for field, value in values.items():
        if value is not None and others.filter(**{field: value}).exists():
            raise ApiError(409, f"{field} already exists", field)


def save_unique(
    instance: models.Model,
    *,
    conflict: str,
    field: str | None,
    check: Callable[[], None] | None = None,
    status: int = 409,
    **save_kwargs: Any,
) -> None:
    """Saves, turning a uniqueness race the earlier check could not see into the answer that check would
    have given (CONTRACT 12). The save runs in a savepoint, so the transaction survives the
    IntegrityError; `check`, run again then, sees the row that won the race (committed by now: under READ
    COMMITTED each query sees the latest commits) and words the answer exactly. `conflict` and `field` are
    the answer when it cannot tell."""
    with unique_conflict(conflict, field, check=check, status=status):
        instance.save(**save_kwargs)


@contextmanager
def unique_conflict(
    conflict: str, field: str | None, *, check: Callable[[], None] | None = None, status: int = 409
) -> Iterator[None]:
    """`save_unique` for a block of writes (a service that saves through another function)."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        if check is not None:
            check()
        raise ApiError(status, conflict, field) from exc
