"""Encoding records one at a time (`Encoder`, `to_json`): a list page stops at its byte budget
(docs/api.md#lists), and one large record is written as a stream of pieces, so a worker never builds
more of an answer than its budget holds."""

import itertools
import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any

from django.db import models
from django.db.models.functions import Cast
from rest_framework import serializers
from rest_framework.utils import encoders

from .serializers import _COLUMN, _MANY, PREFETCHED, ResourceSerializer, _iso_zone

# Encoding records one at a time (a list page, docs/api.md#lists, #quotas-and-budgets): a page stops at its
# byte budget, so a worker must never build more of it than the budget holds. `Encoder` writes each record as
# the JSON bytes DRF's JSONRenderer would write of its representation, and reads a `ResourceSerializer`'s
# nested many-to-many records (a role's permissions, a membership's roles) for a few records at a time, each
# related row once per page however many records hold it (`prefetch_related` makes one instance per pair: 40
# roles holding the same 500 permissions were 20,000 instances of them, docs/api.md#quotas-and-budgets). What
# a worker holds is then what the page holds, plus the rows of one read, plus the nested rows it keeps to
# write again (at most KEPT_BYTES of them per relation).
#
# One object is written the same way, as a stream of pieces (`Encoder.stream`) never joined: a
# membership of 50 roles of 500 permissions at their size limits is some 600 MB of JSON, written a
# role at a time and a few permissions at a time, so the worker holds about one read's rows.

# DRF's JSONRenderer with its defaults (UNICODE_JSON, COMPACT_JSON, STRICT_JSON).
_JSON = encoders.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

FIRST_READ = 100  # rows read at once while their size is unknown (a page of the API's default size: one read)
READ_BYTES = 1024 * 1024  # then about this many encoded bytes of rows at once
KEPT_BYTES = 8 * 1024 * 1024  # the written nested rows a relation keeps to write again (past it: read again)
KEPT_ROW_BYTES = 1024 * 1024  # a nested row larger than this (a role of many permissions) is never kept


def to_json(value: Any) -> bytes:
    # JSONRenderer escapes these two line ends (valid in JSON, not in JavaScript source); so does this.
    return _JSON.encode(value).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


class Encoder:
    """Writes records with `serializer` (any serializer; a `ResourceSerializer`'s nested many-to-many
    records read as described above), keeping the count and size of what it wrote so far (`rows_to_read`)."""

    def __init__(self, serializer: serializers.Serializer):
        self.serializer = serializer
        self.zone = _iso_zone()
        self.count = self.size = 0
        # The record's fields in order: runs of its own fields (a list of plan entries), and between them
        # its nested relations (`Related`) and its JSON columns, which the database hands over as the
        # JSON text it holds (`StoredJson`): a 16 KiB `meta` is copied, never parsed into thousands of
        # Python objects and written again.
        self.parts: list[list | Related | StoredJson] = []
        self.related: list[Related] = []
        if isinstance(serializer, ResourceSerializer):
            model = serializer.Meta.model
            run: list = []
            for entry in serializer.bound_plan():
                name, how, attr, _, field = entry
                if how is _MANY:
                    self.related.append(Related(model, attr, name, Encoder(field.child)))
                    self.parts += [run, self.related[-1]]
                    run = []
                elif how is _COLUMN and type(field) is serializers.JSONField and not field.binary:
                    self.parts += [run, StoredJson(attr, name)]
                    run = []
                else:
                    run.append(entry)
            self.parts.append(run)

    def prepare(self, records: models.QuerySet) -> models.QuerySet:
        """`records` as the encoder reads them: each with the ids its nested relations hold."""
        for part in self.parts:
            if isinstance(part, Related | StoredJson):
                records = part.prepare(records)
        return records

    def rows_to_read(self) -> int:
        """How many rows to read next: FIRST_READ, then as many as READ_BYTES holds at the mean size."""
        if not self.count:
            return FIRST_READ
        return max(1, READ_BYTES * self.count // max(self.size, 1))

    def load(self, records: list[Any]) -> None:
        """Queues the nested rows `records` hold, to be read a few at a time as they are written."""
        for part in self.related:
            part.load(records)

    def encode(self, records: list[Any]) -> Iterator[bytes]:
        """Each record's JSON, in order; stop iterating and nothing more is read."""
        self.load(records)
        for record in records:
            fragment = self._one(record)
            self.count += 1
            self.size += len(fragment)
            yield fragment

    def joined(self, record: Any, up_to: int) -> bytes | Iterator[bytes]:
        """One record of records already `load`ed (a list page's): its JSON joined, or, when it has
        nested relations and passes `up_to` bytes, an iterator of all its pieces (those written so far,
        then the rest, written as it is iterated), so that a record past a page's budget is never held."""
        if not self.related:
            fragment = self._one(record)
        else:
            pieces, kept, size = self.pieces(record), [], 0
            for piece in pieces:
                kept.append(piece)
                size += len(piece)
                if size > up_to:
                    return itertools.chain(kept, pieces)
            fragment = b"".join(kept)
        self.count += 1
        self.size += len(fragment)
        return fragment

    def stream(self, record: Any) -> Iterator[bytes]:
        """One record's JSON (`encode`'s bytes), in pieces never joined: each nested row is read when it
        is written and dropped once written, unless small enough to keep."""
        self.load([record])
        if not self.related:
            yield self._one(record)
        else:
            yield from self.pieces(record)

    def _one(self, record: Any) -> bytes:
        if not self.parts or not isinstance(record, models.Model):
            return to_json(self.serializer.to_representation(record))
        if len(self.parts) == 1:
            return to_json(self.serializer.represent_fields(record, self.zone, self.parts[0]))
        return b"".join(self.pieces(record))

    def pieces(self, record: models.Model) -> Iterator[bytes]:
        """The JSON of a record with parts (JSON columns, nested relations), in pieces."""
        yield b"{"
        started = False
        for part in self.parts:
            if part == []:  # no own field between two relations, or before the first
                continue
            if started:
                yield b","
            started = True
            if isinstance(part, StoredJson):
                yield part.key
                yield part.value(record)
            elif isinstance(part, Related):
                yield part.key
                yield b"["
                yield from part.rows_of(record)
                yield b"]"
            else:
                yield to_json(self.serializer.represent_fields(record, self.zone, part))[1:-1]
        yield b"}"


class StoredJson:
    """A JSON column of the records an `Encoder` writes, read as the text the database holds (valid JSON:
    PostgreSQL writes `jsonb` out canonically, SQLite keeps what Django wrote); DRF would parse it and
    write it again, the same value."""

    def __init__(self, attr: str, name: str):
        self.column = attr
        self.text = f"{PREFETCHED}{attr}_text"
        self.key = to_json(name) + b":"

    def prepare(self, records: models.QuerySet) -> models.QuerySet:
        text = Cast(self.column, models.TextField())
        return records.defer(self.column).annotate(**{self.text: text})

    def value(self, record: models.Model) -> bytes:
        text = getattr(record, self.text)
        return b"null" if text is None else text.encode()


class IdList(models.Aggregate):
    """The ids of a group as one string, comma-separated (a UUID holds no comma)."""

    function = "STRING_AGG"
    template = "%(function)s(CAST(%(expressions)s AS text), ',')"
    output_field = models.TextField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return super().as_sql(compiler, connection, function="GROUP_CONCAT", **extra)


class Related:
    """One nested many-to-many relation of the records an `Encoder` writes: which rows each record holds
    (read with the record: `prepare`), then the rows themselves as the records need them, read a few at a
    time in the order they are first needed, each written by its own `Encoder`. A written row is kept to
    be written again (a permission many roles of a page hold) while the kept rows stay within
    KEPT_BYTES; past that they are dropped, and read again if a record needs one later."""

    def __init__(self, model: type[models.Model], attr: str, name: str, encoder: Encoder):
        field = model._meta.get_field(attr)
        self.through = field.remote_field.through
        self.owner, self.target = f"{field.m2m_field_name()}_id", f"{field.m2m_reverse_field_name()}_id"
        self.model = field.related_model
        self.key = to_json(name) + b":"
        self.ids = f"{PREFETCHED}{attr}_ids"
        self.encoder = encoder
        self.nested = bool(encoder.related)  # its rows have relations of their own (a role's permissions)
        self.written: dict[Any, bytes | None] = {}  # kept rows; None: gone since the record was read
        self.kept = 0  # their bytes
        self.held: dict[Any, list] = {}  # record pk -> the ids of its rows, until the record is written
        self.pending: deque = deque()  # rows not read yet, in the order first needed
        self.queued: set = set()  # the ids `pending` holds (an id read out of its turn is skipped there)
        self.read: dict[Any, models.Model] = {}  # rows read, not written yet

    def prepare(self, records: models.QuerySet) -> models.QuerySet:
        held = self.through.objects.filter(**{self.owner: models.OuterRef("pk")}).values(self.owner)
        return records.annotate(
            **{self.ids: models.Subquery(held.annotate(ids=IdList(self.target)).values("ids"))}
        )

    def load(self, records: list[models.Model]) -> None:
        for record in records:
            ids = getattr(record, self.ids)
            if not ids:
                continue
            targets = self.held[record.pk] = [uuid.UUID(pk) for pk in ids.split(",")]
            for target in targets:
                if target not in self.written and target not in self.queued and target not in self.read:
                    self.queued.add(target)
                    self.pending.append(target)

    def rows_of(self, record: models.Model) -> Iterator[bytes]:
        """The JSON of the record's rows, separated by commas (a row gone since is left out)."""
        first = True
        targets = self.held.pop(record.pk, ())
        for index, target in enumerate(targets):
            fragment = self.written.get(target, _NOT_KEPT)
            if fragment is _NOT_KEPT:
                if target not in self.read:
                    self._read(target, itertools.islice(targets, index + 1, None))
                row = self.read.pop(target, None)
                if row is None:
                    continue
                if not first:
                    yield b","
                first = False
                yield from self._write(target, row)
            elif fragment is not None:
                if not first:
                    yield b","
                first = False
                yield fragment

    def _write(self, target: Any, row: models.Model) -> Iterator[bytes]:
        encoder = self.encoder
        if not self.nested:
            fragment = encoder._one(row)
            encoder.count += 1
            encoder.size += len(fragment)
            self._keep(target, fragment)
            yield fragment
            return
        # A row with rows of its own (a role) is written in pieces, kept only while it is small.
        kept: list[bytes] | None = []
        size = 0
        for piece in encoder.pieces(row):
            yield piece
            size += len(piece)
            if kept is not None:
                kept.append(piece)
                if size > KEPT_ROW_BYTES:
                    kept = None
        encoder.count += 1
        encoder.size += size
        if kept is not None:
            self._keep(target, b"".join(kept))

    def _keep(self, target: Any, fragment: bytes | None) -> None:
        size = len(fragment) if fragment is not None else 0
        if self.kept + size > KEPT_BYTES:
            self.written.clear()
            self.kept = 0
        self.written[target] = fragment
        self.kept += size

    def _read(self, first: Any, upcoming: Iterator[Any]) -> None:
        """Reads `first`, the record's `upcoming` rows not at hand, then the rows queued for the records
        after it, as many as `rows_to_read` says: what is read is what is written next (a row dropped
        from those kept and needed again does not bring rows needed much later, to be held till then)."""
        batch, limit = [first], self.encoder.rows_to_read()
        self.queued.discard(first)
        for target in upcoming:
            if len(batch) >= limit:
                break
            if target not in self.written and target not in self.read and target not in batch:
                self.queued.discard(target)
                batch.append(target)
        while len(batch) < limit and self.pending:
            target = self.pending.popleft()
            if target in self.queued:
                self.queued.discard(target)
                batch.append(target)
        rows = list(self.encoder.prepare(self.model._default_manager.filter(pk__in=batch)))
        # In the order they are needed, so that their own rows are queued in the order they are written
        # and a read brings what is written next, not rows to hold until much later.
        order = {target: index for index, target in enumerate(batch)}
        rows.sort(key=lambda row: order[row.pk])
        self.encoder.load(rows)
        for row in rows:
            self.read[row.pk] = row
        for target in batch:
            if target not in self.read:
                self._keep(target, None)


_NOT_KEPT = object()
