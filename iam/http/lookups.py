"""`HasTags`: records whose JSON `tags` array holds every given tag (docs/api.md#lists, `filter.tags`).

PostgreSQL answers it with jsonb containment (`@>`, served by a GIN index); SQLite, which Django's JSON
`contains` does not support, with one `json_each` probe per tag."""

import json

from django.db.models import Expression, F
from django.db.models.fields import BooleanField


class HasTags(Expression):
    output_field = BooleanField()
    conditional = True

    def __init__(self, field: str, tags: list[str]):
        super().__init__()
        self.column = F(field)
        self.tags = list(tags)

    def resolve_expression(self, query=None, allow_joins=True, reuse=None, summarize=False, for_save=False):
        clone = self.copy()
        clone.column = self.column.resolve_expression(query, allow_joins, reuse, summarize, for_save)
        return clone

    def get_source_expressions(self):
        return [self.column]

    def set_source_expressions(self, exprs):
        (self.column,) = exprs

    def as_sql(self, compiler, connection):
        column, params = compiler.compile(self.column)
        # `column` is the compiled, quoted column reference; the tags travel as parameters.
        probe = f"EXISTS (SELECT 1 FROM json_each({column}) WHERE json_each.value = %s)"  # noqa: S608
        probes = " AND ".join([probe] * len(self.tags))
        return f"({probes})", [value for tag in self.tags for value in (*params, tag)]

    def as_postgresql(self, compiler, connection):
        column, params = compiler.compile(self.column)
        return f"({column} @> %s::jsonb)", [*params, json.dumps(self.tags)]
