"""docs/security.md#the-edges: every response, errors included, carries the security headers;
Strict-Transport-Security only when IAM_BEHIND_PROXY is on. The errors made by the outermost middleware (the
413 refused before any other middleware runs, the re-rendered 404/405/500) are the ones that used to lose
them."""

import json

import pytest
from django.test import override_settings
from django.urls import include, path

from iam.http.endpoint import Endpoint
from tests.conftest import ApiClient, err, ok

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
HSTS = "max-age=31536000"


class Boom(Endpoint):
    public = True

    def handle(self, request, data):
        raise RuntimeError("unexpected")


urlpatterns = [path("boom", Boom.as_view()), path("", include("iam.urls"))]


def success(api):
    assert ok(api.call("/auth/reset-password", {"email": "nobody@example.com"}))["message"]
    return api.get("/health-check")


def too_large(api):
    body = json.dumps({"email": "x" * (1024 * 1024)})
    response = api.call("/auth/login", raw=body)
    err(response, 413, "request body too large")
    return response


def not_found(api):
    return err_response(api.get("/no/such/path"), 404, "not found")


def wrong_method(api):
    response = err_response(api.get("/auth/login"), 405, "use POST")
    assert response["Allow"] == "POST"
    return response


def server_error(api):
    with override_settings(ROOT_URLCONF=__name__, DEBUG=False):
        return err_response(ApiClient(raise_request_exception=False).call("/boom", {}), 500)


def bad_host(api):
    return err_response(api.get("/health-check", headers={"Host": "evil.example"}), 400, "bad request")


def unauthenticated(api):
    return err_response(api.call("/accounts/list", {}), 401)


def admin_page(api):
    response = api.get("/admin/login/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    return response


def err_response(response, status, message=None):
    err(response, status, message)
    return response


CASES = [success, too_large, not_found, wrong_method, server_error, bad_host, unauthenticated, admin_page]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_every_response_carries_the_security_headers(api, case):
    response = case(api)
    for name, value in HEADERS.items():
        assert response.get(name) == value, (name, dict(response.headers))
    assert "Strict-Transport-Security" not in response


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_behind_a_proxy_every_response_also_carries_hsts(api, case):
    with override_settings(IAM_BEHIND_PROXY=True):
        response = case(api)
    assert response["Strict-Transport-Security"] == HSTS
    for name, value in HEADERS.items():
        assert response.get(name) == value, (name, dict(response.headers))
