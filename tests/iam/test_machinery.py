"""docs/api.md#errors, #lists through HTTP: every failure is a flat JSON body, on every endpoint family."""

import io
import json

import pytest
from django.test import override_settings
from django.urls import path

from iam.http.endpoint import Endpoint
from tests.conftest import ApiClient, client_for, err, ok
from tests.endpoints import ENDPOINTS, LISTS, PATHS

WITH_ID = [
    path for path in PATHS if "id" in getattr(ENDPOINTS[path].request_serializer, "_declared_fields", {})
]


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
def test_wrong_method_is_405_json(any_api, api, path):
    """Whoever asks, signed in or not: the method is answered first, and says which one to use."""
    for client in (any_api(path), api):
        response = client.get(path)
        err(response, 405, "use POST")
        assert response["Allow"] == "POST"
        for method in ("PUT", "PATCH", "DELETE", "OPTIONS"):
            response = client.call(path, {}, method=method)
            err(response, 405, "use POST")
            assert response["Allow"] == "POST"


@pytest.mark.parametrize("path", PATHS)
def test_body_over_one_mebibyte_is_413(any_api, path):
    body = json.dumps({"name": "x" * (1024 * 1024)})
    err(any_api(path).call(path, raw=body), 413, "request body too large")


def chunked(api: ApiClient, path: str, body: bytes):
    """A body as a server hands over a chunked one: decoded, with `Transfer-Encoding` and no length (the
    test client cannot send chunks; tests/live/test_robustness.py sends real ones to gunicorn)."""
    return api.generic("POST", path, "", HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input": io.BytesIO(body)})


def test_a_chunked_body_is_read(api, member):
    body = json.dumps({"email": member.email, "password": "a wrong password"}).encode()
    err(chunked(api, "/auth/login", body), 401, "invalid credentials")  # not "email and password required"
    err(chunked(api, "/auth/login", b"{bad"), 400, "Malformed JSON syntax.")
    err(chunked(api, "/auth/login", b""), 400, "email and password required")


def test_a_chunked_body_over_one_mebibyte_is_413(api):
    body = json.dumps({"email": "x" * (1024 * 1024)}).encode()
    err(chunked(api, "/auth/login", body), 413, "request body too large")
    err(chunked(api, "/auth/login", b" " * (1024 * 1024) + b"{}"), 413, "request body too large")
    ok(
        chunked(
            api, "/auth/reset-password", json.dumps({"email": "a@example.com"}).ljust(1024 * 1024).encode()
        )
    )


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
        ({"email": 5, "password": "a-long-passphrase"}, "email must be a string"),
        ({"email": "x@example.com", "password": ["a"]}, "password must be a string"),
        ({"email": "x@example.com", "password": "a-long-passphrase", "name": 7}, "name must be a string"),
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


# The list contract (docs/api.md#lists), on accounts/list.


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"filter": {"fields": {"foo": 1}}}, "unknown filter field: foo"),
        ({"filter": {"fields": {"password": "x"}}}, "unknown filter field: password"),
        ({"options": {"order_bys": "password"}}, "unknown filter field: password"),
        ({"options": {"order_bys": ["!nope"]}}, "unknown filter field: nope"),
        ({"options": {"limit": 0}}, "options.limit must be at least 1"),
        ({"options": {"limit": 1001}}, "options.limit must be at most 1000"),
        ({"options": {"limit": "10"}}, "options.limit must be an integer"),
        ({"options": {"offset": -1}}, "options.offset must be at least 0"),
        ({"options": {"order_bys": 5}}, "options.order_bys must be a string or an array of strings"),
        ({"filter": {"fields": {"verified": "yes"}}}, "invalid value for filter field: verified"),
        ({"filter": {"fields": {"id": "123"}}}, "invalid value for filter field: id"),
        ({"filter": {"fields": {"created_at": "yesterday"}}}, "invalid value for filter field: created_at"),
        ({"filter": {"fields": {"email": "a\x00b"}}}, "filter must be valid unicode without NUL characters"),
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


# docs/api.md#errors, #validation against hostile bodies: whatever arrives, the answer is a 4xx with the flat
# body, never a 5xx, on SQLite and on PostgreSQL (where NUL in a JSONField, or a number out of range, used to
# be 500s).

MAX_DEPTH = 32
UNICODE = "{field} must be valid unicode without NUL characters"
LONE_SURROGATE = r'"\ud800"'  # raw JSON: the escape decodes to a lone surrogate
NUL = r'"a\u0000b"'


def nested(depth: int, kind: str = "[") -> str:
    """A JSON value of `depth` nested containers."""
    if kind == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def top_level_fields(path: str) -> list[str]:
    serializer = ENDPOINTS[path].request_serializer
    return sorted(serializer().fields) if serializer is not None else []


def answered_4xx(response) -> dict:
    """A 4xx with the docs/api.md#errors flat body, or a 200 envelope; never anything else."""
    body = response.json()
    assert response.status_code < 500, (response.status_code, body)
    if response.status_code == 200:
        assert body["success"] is True, body
        return body
    assert 400 <= response.status_code < 500, body
    assert body["success"] is False and body["status"] == response.status_code, body
    assert set(body) <= {"success", "status", "message", "field"}, body
    assert isinstance(body["message"], str) and body["message"], body
    return body


@pytest.fixture
def hostile(operator, root, settings):
    """Posts a raw body as an operator in the root workspace (so the body handling is what answers), with
    a fresh session after `/auth/revoke`, which ends the operator's sessions when the body is fine. The
    OAuth provider is configured, else initiate answers its 503 before reading the body."""
    settings.IAM_IDP_A_CLIENT_ID = "client"
    settings.IAM_IDP_A_CLIENT_SECRET = "secret"
    for name in ("AUTHORIZE", "TOKEN", "USERINFO"):
        setattr(settings, f"IAM_IDP_A_{name}_URL", f"https://idp.example/{name.lower()}")
    settings.IAM_OAUTH_REDIRECT_ALLOWLIST = ["https://app.example"]

    clients = [client_for(operator, root)]

    def post(path: str, raw: str):
        response = clients[0].call(path, raw=raw)
        if path == "/auth/revoke":
            operator.refresh_from_db(fields=["session_version"])
            clients[0] = client_for(operator, root)
        return response

    return post


@pytest.mark.parametrize("path", PATHS)
def test_deep_nesting_is_400_without_recursion(hostile, path):
    # 32 levels pass the parser (the endpoint then answers as it will); 33 and more are refused.
    answered_4xx(hostile(path, '{"x":' + nested(MAX_DEPTH - 1) + "}"))
    answered_4xx(hostile(path, '{"x":' + nested(MAX_DEPTH - 1, "{") + "}"))
    for body in (
        '{"x":' + nested(MAX_DEPTH) + "}",
        nested(MAX_DEPTH + 1, "{"),
        nested(100_000),
        nested(100_000, "{"),
        "[" * 100_000,  # unterminated as well
        '{"a":[' + '{"b":[' * 20_000 + "]}" * 20_000 + "]}",
    ):
        err(hostile(path, body), 400, "Invalid JSON structure.")


@pytest.mark.parametrize("path", PATHS)
def test_lone_surrogates_and_nul_are_400_naming_the_top_level_field(hostile, path):
    for field in [*top_level_fields(path), "unknown_field"]:
        for value in (
            LONE_SURROGATE,
            NUL,
            r'"\udfff tail"',
            r'"\ud800\ud800"',
            f"[{NUL}]",
            f'{{"schema_version": "1", "nested": {{"deeper": [{LONE_SURROGATE}]}}}}',
            f'{{"schema_version": "1", {NUL}: 1}}',
            f'{{"fields": {{"email": {NUL}, "name": {LONE_SURROGATE}}}}}',
            '"' + "\x00" + '"',  # a raw NUL inside a string is not JSON at all
        ):
            response = hostile(path, f'{{"{field}": {value}}}')
            if value == '"\x00"':
                err(response, 400, "Malformed JSON syntax.")
                continue
            body = err(response, 400, UNICODE.format(field=field))
            assert body["field"] == field, body
    body = err(hostile(path, '{"a\\u0000": 1}'), 400, UNICODE.format(field="a\\u0000"))
    assert body["field"] == "a\\u0000"


@pytest.mark.parametrize("path", PATHS)
def test_numbers_out_of_range_are_400(hostile, path):
    for field in [*top_level_fields(path), "unknown_field"]:
        for value in (
            "1e999999",
            "-1e400",
            "1" * 100_000,
            "-" + "9" * 4301,
            f'{{"schema_version": "1", "n": {"1" * 100_000}}}',
            '{"schema_version": "1", "n": [1e999]}',
        ):
            err(hostile(path, f'{{"{field}": {value}}}'), 400, "Invalid JSON structure.")
        for literal in ("NaN", "Infinity", "-Infinity"):  # Python's extensions, not JSON
            err(hostile(path, f'{{"{field}": {literal}}}'), 400, "Malformed JSON syntax.")
        # in range: the endpoint judges the value itself
        answered_4xx(hostile(path, f'{{"{field}": {"9" * 4300}}}'))
        answered_4xx(hostile(path, f'{{"{field}": 1e308}}'))


WRONG_TYPES = [
    "null",
    "true",
    "-1",
    "1.5",
    '""',
    "[]",
    "{}",
    '["x", 1, null]',
    '{"schema_version": 1, "x": {"y": [1, {"z": null}]}}',
    '"00000000-0000-0000-0000-000000000000"',
    '"\\ud83d\\ude00"',  # a valid surrogate pair: an emoji, not a lone surrogate
    str(2**63),
]
EVERY_TYPE = [
    *WRONG_TYPES,
    "0",
    '"x"',
    '"!created_at"',
    '["00000000-0000-0000-0000-000000000000"]',
    str(-(2**63) - 1),
]


@pytest.mark.parametrize("path", PATHS)
def test_wrong_types_and_big_strings_are_answered_without_5xx(hostile, path):
    fields = top_level_fields(path)
    for field in [*fields, "unknown_field"]:
        for value in WRONG_TYPES:
            answered_4xx(hostile(path, f'{{"{field}": {value}}}'))
        # just under the 1 MiB limit (docs/api.md#errors: 413 is for bodies over it)
        answered_4xx(hostile(path, json.dumps({field: "é" * (500 * 1024)}, ensure_ascii=False)))
    if fields:
        answered_4xx(hostile(path, json.dumps(dict.fromkeys(fields, "x" * (1000 * 1024 // len(fields))))))
        # every field at once, of every type
        for value in EVERY_TYPE:
            answered_4xx(hostile(path, "{" + ",".join(f'"{field}": {value}' for field in fields) + "}"))
    for value in WRONG_TYPES:
        answered_4xx(hostile(path, f'{{"filter": {{"fields": {{"id": {value}}}, "tags": {value}}}}}'))
        answered_4xx(
            hostile(path, f'{{"options": {{"order_bys": {value}, "limit": {value}, "offset": {value}}}}}')
        )


@pytest.mark.parametrize("path", PATHS)
def test_duplicated_keys_keep_the_last_value(hostile, path):
    for field in [*top_level_fields(path), "unknown_field"]:
        answered_4xx(hostile(path, f'{{"{field}": {LONE_SURROGATE}, "{field}": "x"}}'))
        # the last value is the one judged: a bad first value is gone, a bad last one is refused
        body = err(hostile(path, f'{{"{field}": "x", "{field}": {NUL}}}'), 400, UNICODE.format(field=field))
        assert body["field"] == field


def test_duplicated_keys_last_wins(api):
    raw = '{"email": "first@example.com", "password": "a-long-passphrase", "email": "last@example.com"}'
    assert ok(api.call("/auth/register", raw=raw))["account"]["email"] == "last@example.com"
    raw = '{"options": {"limit": 1000, "limit": 1}}'
    client = ApiClient(
        ok(api.call("/auth/login", {"email": "last@example.com", "password": "a-long-passphrase"}))[
            "access_token"
        ]
    )
    assert ok(client.call("/workspace/list", raw=raw))["metadata"]["limit"] == 1


def test_nul_and_surrogates_never_reach_the_database(operator_api, root):
    admin = operator_api.in_workspace(root)
    body = err(
        admin.call(
            "/projects/create",
            raw='{"name": "p", "config": {"schema_version": "1"}, "tags": [], '
            '"meta": {"schema_version": "1", "note": "a\\u0000b"}}',
        ),
        400,
        UNICODE.format(field="meta"),
    )
    assert body["field"] == "meta"
    err(
        admin.call("/projects/create", raw='{"name": "\\udc80", "config": {}, "tags": [], "meta": {}}'),
        400,
        UNICODE.format(field="name"),
    )
    from tenancy.models import Project

    assert not Project.objects.exists()


def test_clients_validate_fast_path_refuses_lone_surrogates(api):
    """The hot path reads the body without the serializer: the parser protects it all the same."""
    base = {
        "client_id": "00000000-0000-0000-0000-000000000000",
        "client_secret": "s",
        "token": "t",
    }
    for field in ("client_secret", "token", "permission", "client_id", "project_id"):
        raw = json.dumps(base)[:-1] + f', "{field}": {LONE_SURROGATE}}}'
        body = err(api.call("/clients/validate", raw=raw), 400, UNICODE.format(field=field))
        assert body["field"] == field
    assert ok(api.call("/clients/validate", base))["reason"] == "invalid_client"


def test_a_deep_body_is_refused_fast(api):
    import time

    started = time.monotonic()
    for body in (nested(500_000), "[" * (1024 * 1024 - 10), '"' + "[" * 1_000_000 + '"'):
        response = api.call("/auth/login", raw=body)
        assert response.status_code == 400
    assert time.monotonic() - started < 5


# options.order_bys (docs/api.md#validation): at most 8 entries


@pytest.mark.parametrize("path", LISTS)
def test_order_bys_has_at_most_eight_items(any_api, path):
    client = any_api(path)
    field = ENDPOINTS[path].order_fields[0]  # created_at, or occurred_at for the audit log
    data = ok(client.call(path, {"options": {"order_bys": [field, f"!{field}"] * 4}}))
    assert len(data["metadata"]["order_bys"]) == 8
    for count in (9, 90_000):
        body = err(
            client.call(path, {"options": {"order_bys": ["x"] * count}}),
            400,
            "order_bys must have at most 8 items",
        )
        assert body["field"] == "options.order_bys"


# Times that parse but have no value in UTC, or no such day: 400, never a 500 (OverflowError, ValueError)

IMPOSSIBLE_TIMES = [
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "2024-02-30T00:00:00Z",
    "2024-01-01T24:00:00Z",
    "2024-01-01T00:00:00+25:00",
]


def test_list_filters_on_impossible_times_are_400(operator_api):
    """accounts/list has the time filters (docs/api.md#lists); every list parses them in
    `_parse_filter_value`."""
    for name in ("created_at", "updated_at"):
        for value in IMPOSSIBLE_TIMES:
            response = operator_api.call("/accounts/list", {"filter": {"fields": {name: value}}})
            assert err(response, 400, f"invalid value for filter field: {name}")["field"] == name


def test_credential_last_used_at_on_impossible_times_is_400(operator, root):
    from tests.factories import CredentialFactory

    credential = CredentialFactory(workspace=root)
    admin = client_for(operator, root)
    for value in IMPOSSIBLE_TIMES:
        body = {"id": str(credential.pk), "account_id": str(credential.account_id), "last_used_at": value}
        assert err(admin.call("/credentials/update", body), 400)["field"] == "last_used_at"
