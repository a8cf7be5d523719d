"""The one write path of the services (issue 13): a create service builds its record and calls
`save_new`, an update service calls `save_changes` (uniqueness, audit entry, save); a delete or any other
change records itself with `iam.audit.record_for`, and `iam.events.emit_for` records the push event.
Services take a record's fields as typed keywords (`**changes: Unpack[X]` under `strict`); the commands
run them through `ServiceCommand`."""

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, NotRequired, TypedDict, TypeVar, get_args

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from iam import audit
from iam.context import as_command
from iam.errors import ApiError


class Tagged(TypedDict, total=False):
    """What an update service may be sent for every resource. A service takes a record's fields as
    `**changes: Unpack[<such a TypedDict>]` (`**fields` for a create) under `@strict`. In an update a key
    left out is not sent, None sets null (SPEC 1: only what is sent changes)."""

    tags: list[str]
    meta: dict[str, Any]


class Described(Tagged, total=False):
    name: str
    description: str | None


class NewResource(TypedDict):
    """What a create service is sent for a named resource (SPEC 1: `tags` and `meta` are required)."""

    name: str
    tags: list[str]
    meta: dict[str, Any]
    description: NotRequired[str | None]


Service = TypeVar("Service", bound=Callable[..., Any])


def strict(service: Service) -> Service:
    """Makes a service that takes `**fields: Unpack[X]` refuse a keyword X does not declare and require
    those X requires, as Python does for named keyword arguments (TypeError): a misspelled change must
    fail, not vanish (issue 13)."""
    signature = inspect.signature(service, eval_str=True)
    (var_keyword,) = (p for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD)
    (declared,) = get_args(var_keyword.annotation)
    allowed = frozenset(declared.__annotations__)

    @functools.wraps(service)
    def checked(*args: Any, **kwargs: Any) -> Any:
        given = signature.bind(*args, **kwargs).arguments.get(var_keyword.name, {}).keys()
        if unexpected := sorted(given - allowed):
            raise TypeError(f"{service.__qualname__}() got an unexpected keyword argument '{unexpected[0]}'")
        if missing := sorted(declared.__required_keys__ - given):
            raise TypeError(f"{service.__qualname__}() missing required keyword argument '{missing[0]}'")
        return service(*args, **kwargs)

    return checked  # type: ignore[return-value]


def renamed(changes: Mapping[str, Any], **names: str) -> dict[str, Any]:
    """`changes` with the keys the API renames (`new_code="code"`) under their field's name."""
    return {names.get(key, key): value for key, value in changes.items()}


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


def save_new(
    instance: models.Model,
    *,
    audited: Iterable[str],
    actor: Any = None,
    also: Mapping[str, Any] | None = None,
    unique: tuple[str, ...] = (),
    conflict: str | None = None,
    field: str | None = None,
) -> None:
    """The write of a create service: inserts `instance` and records `<model>.create` with each `audited`
    field and the relations in `also`. `unique` names the fields no other record of its workspace (of the
    table, for one in no workspace) may share: CONTRACT 12's 409 `<field> already exists`, checked first
    and again when a race past the check breaks a constraint (`save_unique`). Else `conflict` and `field`,
    when given, are the answer to a broken constraint."""
    values = {name: getattr(instance, name) for name in unique}
    check, conflict, field = _uniqueness(instance, values, conflict, field)
    if check is not None:
        check()
    _save(instance, check=check, conflict=conflict, field=field, force_insert=True)
    audit.record_for(
        instance, "create", changes=audit.created(instance, audited) | dict(also or {}), actor=actor
    )


def save_changes(
    instance: models.Model,
    changes: Mapping[str, Any],
    *,
    fields: Iterable[str],
    audited: Iterable[str] | None = None,
    actor: Any = None,
    also: Mapping[str, Any] | None = None,
    unique: tuple[str, ...] = (),
    check: Callable[[], None] | None = None,
    conflict: str | None = None,
    field: str | None = None,
) -> None:
    """The write of an update service (SPEC 1: only what is sent changes): applies `changes` to `fields`,
    records `<model>.update` with the before and after of each `audited` field (by default `fields`) it
    changes and the relations in `also` (no entry when nothing changes), and saves. `unique`, `conflict`
    and `field` as `save_new` takes them; `check`, for a rule `unique` cannot say, runs once `instance`
    holds the changes, and again on a broken constraint."""
    fields = list(fields)
    entry = audit.diff(instance, changes, fields if audited is None else audited) | dict(also or {})
    if unique:
        check, conflict, field = _uniqueness(
            instance, {name: changes.get(name) for name in unique}, None, None
        )
    update_fields = apply_changes(instance, changes, fields=fields)
    if check is not None:
        check()
    if entry:
        audit.record_for(instance, "update", changes=entry, actor=actor)
    _save(instance, check=check, conflict=conflict, field=field, update_fields=update_fields)


def _uniqueness(
    instance: models.Model, values: Mapping[str, Any], conflict: str | None, field: str | None
) -> tuple[Callable[[], None] | None, str | None, str | None]:
    """The check, conflict and field of `save_new` and `save_changes` for the unique fields in `values`."""
    if not values:
        return None, conflict, field
    objects = type(instance)._default_manager
    peers = (
        objects.filter(workspace_id=instance.workspace_id) if hasattr(instance, "workspace_id") else objects
    )
    names = list(values)
    return (
        lambda: check_unique(peers.all(), exclude=instance.pk, **values),
        f"{' or '.join(names)} already exists",
        names[0],
    )


def _save(
    instance: models.Model,
    *,
    check: Callable[[], None] | None,
    conflict: str | None,
    field: str | None,
    **save_kwargs: Any,
) -> None:
    if conflict is None:
        instance.save(**save_kwargs)
    else:
        save_unique(instance, conflict=conflict, field=field, check=check, **save_kwargs)


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
