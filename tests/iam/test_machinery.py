"""CONTRACT 1 and 11 through HTTP: every failure is a flat JSON body, on every endpoint family."""

import json

import pytest
from django.test import override_settings
from django.urls import URLResolver, get_resolver, path

from iam.api import Endpoint, ListEndpoint
from tests.conftest import ApiClient, client_for, err, ok


def _endpoints(patterns=None, prefix: str = "") -> dict[str, type[Endpoint]]:
    """Every `Endpoint` the URLconf serves, so each family (and each new endpoint) is covered."""
    found = {}
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.update(_endpoints(pattern.url_patterns, route))
        elif issubclass(getattr(pattern.callback, "view_class", object), Endpoint):
            found["/" + route] = pattern.callback.view_class
    return found


ENDPOINTS = _endpoints()
PATHS = sorted(ENDPOINTS)
WITH_ID = [
    path for path in PATHS if "id" in getattr(ENDPOINTS[path].request_serializer, "_declared_fields", {})
]
LISTS = [path for path in PATHS if issubclass(ENDPOINTS[path], ListEndpoint)]


def test_every_family_is_covered():
    families = {path.split("/")[1] for path in PATHS}
    assert {"auth", "accounts", "workspace", "projects", "roles", "permissions", "memberships"} <= families


@pytest.fixture
def any_api(operator, root):
    """An operator's client acting in the root workspace: it passes authentication, workspace selection
    and the permission check, so what is tested is the body handling."""
    return lambda path: client_for(operator, root)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("raw", ["{bad", '{"a": }', "\x00", "{'single': 1}"])
def test_malformed_json_is_400(any_api, path, raw):
    err(any_api(path).call(path, raw=raw), 400, "Malformed JSON syntax.")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("body", ["[]", '"text"', "42", "null", "true"])
def test_json_that_is_not_an_object_is_400(any_api, path, body):
    err(any_api(path).call(path, raw=body), 400, "Invalid JSON structure.")


@pytest.mark.parametrize("path", PATHS)
def test_wrong_method_is_405_json(any_api, path):
    err(any_api(path).get(path), 405, "method not allowed")
    for method in ("PUT", "PATCH", "DELETE"):
        err(any_api(path).call(path, {}, method=method), 405, "method not allowed")


@pytest.mark.parametrize("path", PATHS)
def test_body_over_one_mebibyte_is_413(any_api, path):
    body = json.dumps({"name": "x" * (1024 * 1024)})
    err(any_api(path).call(path, raw=body), 413, "request body too large")


@pytest.mark.parametrize("path", WITH_ID)
@pytest.mark.parametrize("value", ["not-a-uuid", 42, ["x"], {"a": 1}, True])
def test_bad_uuid_is_400_naming_the_field(any_api, path, value):
    body = err(any_api(path).call(path, {"id": value}), 400)
    assert body["field"] == "id", body


@pytest.mark.parametrize("path", LISTS)
def test_unknown_filter_field_is_400(any_api, path):
    err(any_api(path).call(path, {"filter": {"fields": {"foo": 1}}}), 400, "unknown filter field: foo")
    err(any_api(path).call(path, {"options": {"order_bys": "!foo"}}), 400, "unknown filter field: foo")


@pytest.mark.parametrize("path", [path for path in PATHS if not ENDPOINTS[path].public])
def test_protected_endpoints_need_a_valid_token(api, path):
    message = "Authentication required or invalid credentials."
    err(api.call(path, {}), 401, message)
    err(api.call(path, {}, headers={"Authorization": "Bearer not.a.jwt"}), 401, message)
    err(api.call(path, {}, headers={"Authorization": "Basic dXNlcjpwYXNz"}), 401, message)


@pytest.mark.parametrize("path", ["/nope", "/accounts/", "/accounts/create/", "/auth", "/static/x.css"])
def test_unknown_path_is_404_json(api, path):
    err(api.call(path, {}), 404, "not found")
    err(api.get(path), 404, "not found")


def test_body_is_json_whatever_the_content_type(api):
    response = api.post(
        "/auth/register",
        data=json.dumps({"email": "plain@example.com", "password": "a-long-passphrase"}),
        content_type="text/plain",
    )
    assert ok(response)["account"]["email"] == "plain@example.com"


def test_empty_body_counts_as_empty_object(operator_api):
    data = ok(operator_api.call("/accounts/list", raw=""))
    assert data["metadata"]["limit"] == 100


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"email": 5, "password": "a-long-passphrase"}, "invalid email"),
        ({"email": "x@example.com", "password": ["a"]}, "invalid password"),
        ({"email": "x@example.com", "password": "a-long-passphrase", "name": 7}, "invalid name"),
        ({"email": "not-an-address", "password": "a-long-passphrase"}, "invalid email"),
        (
            {"email": "x@example.com", "password": "a-long-passphrase", "name": "n" * 256},
            "name must have at most 255 characters",
        ),
    ],
)
def test_wrong_types_name_the_field(api, body, message):
    body = err(api.call("/auth/register", body), 400, message)
    assert body["field"] in ("email", "password", "name")


def test_unknown_fields_are_ignored(api):
    data = ok(api.call("/auth/register", {"email": "u@example.com", "password": "a-long-passphrase", "x": 1}))
    assert data["account"]["email"] == "u@example.com"


class Boom(Endpoint):
    public = True

    def handle(self, request, data):
        raise RuntimeError("unexpected")


urlpatterns = [path("boom", Boom.as_view())]


@override_settings(ROOT_URLCONF=__name__, DEBUG=False)
def test_unexpected_error_is_a_json_500(db):
    client = ApiClient(raise_request_exception=False)
    body = err(client.call("/boom", {}), 500, "internal server error")
    assert "unexpected" not in json.dumps(body)


# The list contract (SPEC 4, CONTRACT 11), on accounts/list.


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"filter": {"fields": {"foo": 1}}}, "unknown filter field: foo"),
        ({"filter": {"fields": {"password": "x"}}}, "unknown filter field: password"),
        ({"options": {"order_bys": "password"}}, "unknown filter field: password"),
        ({"options": {"order_bys": ["!nope"]}}, "unknown filter field: nope"),
        ({"options": {"limit": 0}}, "options.limit must be at least 1"),
        ({"options": {"limit": 1001}}, "options.limit must be at most 1000"),
        ({"options": {"limit": "10"}}, "invalid options.limit"),
        ({"options": {"offset": -1}}, "options.offset must be at least 0"),
        ({"options": {"order_bys": 5}}, "options.order_bys must be a string or an array of strings"),
        ({"filter": {"fields": {"verified": "yes"}}}, "invalid value for filter field: verified"),
        ({"filter": {"fields": {"id": "123"}}}, "invalid value for filter field: id"),
        ({"filter": {"fields": {"created_at": "yesterday"}}}, "invalid value for filter field: created_at"),
        ({"filter": {"fields": {"email": "a\x00b"}}}, "invalid value for filter field: email"),
        ({"filter": {"tags": "a"}}, "filter.tags must be an array"),
        ({"filter": {"fields": []}}, "filter.fields must be an object"),
        ({"filter": []}, "invalid filter"),
    ],
)
def test_list_validation(operator_api, body, message):
    err(operator_api.call("/accounts/list", body), 400, message)


def test_list_filters_tags_and_fields_with_and(operator_api):
    from tests.factories import AccountFactory

    AccountFactory(tags=["a", "b"], name="both")
    AccountFactory(tags=["a"], name="only-a")
    AccountFactory(tags=["b", "c"], name="b-c")
    AccountFactory(tags=["a", "b"], name="both-disabled", enabled=False)

    def names(body):
        return sorted(a["name"] for a in ok(operator_api.call("/accounts/list", body))["accounts"])

    assert names({"filter": {"tags": ["a", "b"]}}) == ["both", "both-disabled"]
    assert names({"filter": {"tags": ["a", "b"], "fields": {"enabled": True}}}) == ["both"]
    assert names({"filter": {"tags": ["c"]}}) == ["b-c"]
    assert names({"filter": {"fields": {"name": "only-a"}}}) == ["only-a"]
    assert names({"filter": {"fields": {"description": None, "name": "b-c"}}}) == ["b-c"]


def test_list_order_and_metadata(operator_api, operator):
    from tests.factories import AccountFactory

    for name in ("c", "a", "b"):
        AccountFactory(name=name, tags=["t"])
    body = {"filter": {"tags": ["t"]}, "options": {"order_bys": ["name"], "limit": 2, "offset": 1}}
    data = ok(operator_api.call("/accounts/list", body))
    assert [a["name"] for a in data["accounts"]] == ["b", "c"]
    assert data["metadata"] == {"total": 3, "count": 2, "offset": 1, "limit": 2, "order_bys": ["name"]}
    body["options"]["order_bys"] = ["!name"]
    assert [a["name"] for a in ok(operator_api.call("/accounts/list", body))["accounts"]] == ["b", "a"]
    newest_first = ok(operator_api.call("/accounts/list", {}))
    assert newest_first["metadata"]["order_bys"] == ["!created_at"]
    assert [a["name"] for a in newest_first["accounts"]][:3] == ["b", "a", "c"]
    as_string = ok(operator_api.call("/accounts/list", {"options": {"order_bys": "created_at"}}))
    assert as_string["metadata"]["order_bys"] == ["created_at"]
    assert as_string["accounts"][0]["id"] == str(operator.pk)


def test_offset_past_the_end_is_an_empty_page(operator_api):
    data = ok(operator_api.call("/accounts/list", {"options": {"offset": 50}}))
    assert data["accounts"] == []
    assert data["metadata"]["total"] == 1 and data["metadata"]["count"] == 0


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "*/*", "nonsense"])
def test_answers_are_json_whatever_the_accept_header(operator_api, accept):
    response = operator_api.call("/accounts/list", {}, headers={"Accept": accept})
    assert response["Content-Type"] == "application/json"
    assert ok(response)["metadata"]["total"] == 1
