"""Request ids: generated per request, or taken from a trusted proxy's `X-Request-ID`; echoed
on every response, errors included, and on every log line written while the request runs."""

import logging

import pytest
from django.conf import settings
from django.test import override_settings

from iam.platform.context import RequestIdFilter
from tests.conftest import ApiClient, err

TRUSTED = {"REST_FRAMEWORK": {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}}


def test_each_response_carries_a_fresh_request_id(api):
    first = api.get("/health-check")
    second = api.get("/health-check")
    assert len(first["X-Request-ID"]) == 32 and first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.parametrize(
    ("call", "status"),
    [
        (lambda api: api.call("/nowhere"), 404),
        (lambda api: api.call("/projects/list"), 401),
        (lambda api: api.call("/auth/login", raw="{not json"), 400),
        (lambda api: api.get("/auth/login"), 405),
        (lambda api: api.call("/auth/login", raw=b"x" * (1024 * 1024 + 1)), 413),
    ],
)
def test_errors_carry_the_request_id_too(api, call, status):
    response = call(api)
    assert response.status_code == status
    assert len(response["X-Request-ID"]) == 32


def test_a_client_sent_request_id_is_ignored_without_a_trusted_proxy(api):
    response = api.get("/health-check", headers={"X-Request-ID": "chosen-by-the-client"})
    assert response["X-Request-ID"] != "chosen-by-the-client"


@override_settings(**TRUSTED)
def test_the_proxy_request_id_is_kept_behind_a_trusted_proxy(db):
    api = ApiClient()  # builds its middleware under the setting
    response = api.get("/health-check", headers={"X-Request-ID": "edge-4f1c.7"})
    assert response["X-Request-ID"] == "edge-4f1c.7"


@override_settings(**TRUSTED)
@pytest.mark.parametrize("sent", ["two words", "x" * 129, "line\\nbreak", ""])
def test_a_malformed_proxy_request_id_is_replaced(db, sent):
    response = ApiClient().get("/health-check", headers={"X-Request-ID": sent})
    assert response["X-Request-ID"] != sent and len(response["X-Request-ID"]) == 32


def test_log_lines_written_during_a_request_carry_its_id(api, root, caplog, cache_down):
    caplog.handler.addFilter(RequestIdFilter())
    caplog.set_level(logging.WARNING)
    response = api.call("/auth/login", {"email": "nobody@example.com", "password": "wrong password"})
    err(response, 401, "invalid credentials")
    lines = [record for record in caplog.records if record.name == "iam.platform.cache"]
    assert lines and {record.request_id for record in lines} == {response["X-Request-ID"]}

    caplog.clear()
    logging.getLogger("iam.platform.cache").warning("outside")
    assert caplog.records[0].request_id == "-"


def test_the_configured_log_format_shows_the_request_id(settings):
    assert "%(request_id)s" in settings.LOGGING["formatters"]["plain"]["format"]
    assert settings.LOGGING["handlers"]["console"]["filters"] == ["request_id"]
