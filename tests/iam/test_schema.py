"""The OpenAPI document tells a client what each operation does and needs, from the code: the endpoint's
own docstring, the permission it declares and, for a list, the fields it filters and orders by."""

import inspect

import pytest
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
