from unittest import mock

from django.db.backends.base.base import BaseDatabaseWrapper

from tests.conftest import err, ok


def test_index_greets(api):
    assert ok(api.get("/")) == "Welcome to the IAM service"


def test_health_check_is_healthy_while_the_database_answers(api):
    assert ok(api.get("/health-check")) == "Healthy"


def test_health_check_is_503_when_the_database_is_down(api):
    with mock.patch.object(BaseDatabaseWrapper, "cursor", side_effect=Exception("down")):
        err(api.get("/health-check"), 503, "database unavailable")


def test_health_endpoints_take_get_only(api):
    for path in ("/health-check", "/"):
        response = api.call(path, {})
        err(response, 405, "use GET")
        assert response["Allow"] == "GET"
