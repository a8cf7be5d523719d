"""The OpenAPI document tells a client what each operation does and needs, from the code: the endpoint's
own docstring, the permission it declares and, for a list, the fields it filters and orders by."""

import inspect
import tomllib
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from drf_spectacular.generators import SchemaGenerator

from tests.endpoints import ENDPOINTS, LISTS


@pytest.fixture(scope="module")
def descriptions() -> dict[str, str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {path: schema["paths"][path]["post"].get("description", "") for path in ENDPOINTS}


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_every_operation_is_described_by_its_endpoint(descriptions, path):
    endpoint = ENDPOINTS[path]
    own = endpoint.__dict__.get("__doc__")
    assert own, f"{endpoint.__name__} ({path}) has no docstring of its own"
    assert descriptions[path].startswith(inspect.cleandoc(own))


@pytest.mark.parametrize("path", sorted(path for path, endpoint in ENDPOINTS.items() if endpoint.permission))
def test_the_description_names_the_permission_the_endpoint_checks(descriptions, path):
    assert f"Permission: `{ENDPOINTS[path].permission}`" in descriptions[path]


def test_a_public_endpoint_names_no_permission(descriptions):
    assert ENDPOINTS["/clients/validate"].public
    assert "Permission:" not in descriptions["/clients/validate"]


@pytest.mark.parametrize("path", LISTS)
def test_a_list_names_the_fields_it_filters_and_orders_by(descriptions, path):
    endpoint = ENDPOINTS[path]
    for name in [*endpoint.filter_fields, *endpoint.order_fields]:
        assert f"`{name}`" in descriptions[path].rpartition("\n\n")[2]


def test_the_memberships_list_description(descriptions):
    assert descriptions["/memberships/list"].endswith(
        "`filter.fields` and `options.order_bys` take `id`, `account_id`, `workspace_id`, `scope`, `status`, "
        "`project_id`; `order_bys` also `created_at`, `updated_at`."
    )


@pytest.fixture(scope="module")
def operations() -> list[tuple[str, str, dict]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def test_every_operation_has_a_one_line_summary(operations):
    """/docs lists each operation by its summary: what it does, not a bare path."""
    for path, method, operation in operations:
        summary = operation.get("summary") or ""
        assert summary.strip(), f"{method.upper()} {path} has no summary"
        assert "\n" not in summary and len(summary) <= 80, summary
        assert not summary.endswith("."), summary
        assert summary.lower() != path.strip("/").replace("/", " ").replace("-", " "), summary


def test_every_endpoint_states_its_summary(operations):
    for path, endpoint in ENDPOINTS.items():
        assert endpoint.__dict__.get("summary"), f"{endpoint.__name__} ({path}) states no summary"
    summaries = [operation["summary"] for path, _, operation in operations if path in ENDPOINTS]
    assert len(set(summaries)) == len(summaries)  # each tells its operation apart


def test_the_document_carries_the_release(operations):
    """`info.version` is the release (pyproject.toml), in the committed openapi.yaml too."""
    release = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())["project"]["version"]
    assert SchemaGenerator().get_schema(request=None, public=True)["info"]["version"] == release
    committed = yaml.safe_load((Path(settings.BASE_DIR) / "openapi.yaml").read_text())
    assert committed["info"]["version"] == release
