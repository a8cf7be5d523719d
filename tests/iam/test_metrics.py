"""`GET /metrics`: the Prometheus text format, guarded by IAM_METRICS_TOKEN when set; requests
by route and status, latency, logins by outcome, validations by reason, the outbox backlog computed at
scrape time, e-mails and cache errors. (Push attempts: tests/clients/test_push_metrics.py; several
gunicorn workers summed: tests/live/test_metrics_live.py.)"""

import smtplib
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from clients.models import Delivery
from iam.models import OutboxMessage
from tests.conftest import ApiClient, err, ok, token_for
from tests.factories import PASSWORD, AccountFactory, ClientFactory, CredentialFactory, DeliveryFactory


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(api: ApiClient, **headers) -> dict[tuple[str, tuple], float]:
    response = api.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_requests_are_counted_by_route_and_status_never_by_raw_path(api):
    before = value("iam_http_requests_total", endpoint="health-check", status="200")
    api.get("/health-check")
    api.get("/health-check")
    api.call("/no/such/path/4f6a0c")
    scraped = scrape(api)
    assert (
        scraped[("iam_http_requests_total", (("endpoint", "health-check"), ("status", "200")))] == before + 2
    )
    assert scraped[("iam_http_requests_total", (("endpoint", "unmatched"), ("status", "404")))] >= 1
    assert ("iam_http_request_duration_seconds_count", (("endpoint", "health-check"),)) in scraped
    assert not any("4f6a0c" in str(labels) for _, labels in scraped)


def test_a_route_with_parameters_is_one_label(api, operator):
    from django.test import Client

    web = Client()
    web.force_login(operator)
    web.get(f"/admin/accounts/account/{operator.pk}/change/")
    scraped = scrape(api)
    endpoints = {
        dict(labels).get("endpoint") for name, labels in scraped if name == "iam_http_requests_total"
    }
    assert not any(str(operator.pk) in (endpoint or "") for endpoint in endpoints)
    assert any(endpoint and "<path:object_id>" in endpoint for endpoint in endpoints)


@override_settings(IAM_METRICS_TOKEN="scrape-me-0123456789")
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic scrape-me-0123456789", "Bearer "])
def test_the_token_guards_the_metrics_when_set(api, header):
    headers = {"Authorization": header} if header else {}
    err(api.get("/metrics", headers=headers), 401, "Authentication required or invalid credentials.")


@override_settings(IAM_METRICS_TOKEN="scrape-me-0123456789")
def test_the_right_token_scrapes(api):
    assert scrape(api, Authorization="Bearer scrape-me-0123456789")


def test_metrics_answer_get_only(api):
    """CSRF protection (for the admin's cookie session) once answered a POST here 403: it is enforced, as
    for a browser, and the answer is 405 all the same."""
    for client in (api, Client(enforce_csrf_checks=True)):
        response = client.post("/metrics")
        err(response, 405, "use GET")
        assert response["Allow"] == "GET"


def test_logins_are_counted_by_outcome(api, root):
    account = AccountFactory()
    CredentialFactory(account=account, workspace=root)
    disabled = AccountFactory(enabled=False)
    CredentialFactory(account=disabled, workspace=root)
    before = {
        outcome: value("iam_logins_total", outcome=outcome)
        for outcome in ("ok", "invalid", "throttled", "disabled")
    }

    ok(api.call("/auth/login", {"email": account.email, "password": PASSWORD}))
    err(api.call("/auth/login", {"email": disabled.email, "password": PASSWORD}), 403)
    for _ in range(5):
        err(api.call("/auth/login", {"email": account.email, "password": "wrong password!"}), 401)
    err(api.call("/auth/login", {"email": account.email, "password": PASSWORD}), 429)

    after = {outcome: value("iam_logins_total", outcome=outcome) for outcome in before}
    assert {outcome: after[outcome] - before[outcome] for outcome in before} == {
        "ok": 1,
        "invalid": 5,
        "throttled": 1,
        "disabled": 1,
    }


def test_validations_are_counted_by_reason(api, member_of):
    client = ClientFactory()
    account, _ = member_of(None)  # in a workspace of its own: not a member of the client's
    body = {"client_id": str(client.pk), "client_secret": client.secret, "token": token_for(account)}
    before = {
        reason: value("iam_token_validations_total", reason=reason)
        for reason in ("invalid_client", "not_a_member", "invalid_token")
    }
    ok(api.call("/clients/validate", {**body, "client_secret": "wrong"}))
    ok(api.call("/clients/validate", body))
    ok(api.call("/clients/validate", {**body, "token": "not.a.jwt"}))
    for reason, count in before.items():
        assert value("iam_token_validations_total", reason=reason) == count + 1, reason


def test_the_outbox_backlog_is_read_at_scrape_time(api):
    now = timezone.now()
    old = OutboxMessage.objects.create(topic="email", deadline=now + timedelta(hours=1))
    OutboxMessage.objects.filter(pk=old.pk).update(created_at=now - timedelta(minutes=10))
    OutboxMessage.objects.create(topic="email", deadline=now + timedelta(hours=1))
    OutboxMessage.objects.create(topic="email", status="done", deadline=now)

    scraped = scrape(api)

    assert scraped[("iam_outbox_pending_messages", (("topic", "email"),))] == 2
    assert 600 <= scraped[("iam_outbox_oldest_pending_age_seconds", (("topic", "email"),))] < 700


def test_pending_push_deliveries_count_in_the_backlog(api):
    """Push deliveries keep their retry state on `Delivery`, not in the outbox: the backlog gauges read
    them too, so the IamOutboxBacklog alert covers a stuck push."""
    now = timezone.now()
    stuck = DeliveryFactory()
    Delivery.objects.filter(pk=stuck.pk).update(created_at=now - timedelta(minutes=10))
    DeliveryFactory(client=stuck.client)
    DeliveryFactory(client=stuck.client, status=Delivery.Status.DELIVERED)

    scraped = scrape(api)

    assert scraped[("iam_outbox_pending_messages", (("topic", "push.delivery"),))] == 2
    assert 600 <= scraped[("iam_outbox_oldest_pending_age_seconds", (("topic", "push.delivery"),))] < 700


def test_emails_sent_and_failed_are_counted(api, root, django_capture_on_commit_callbacks, monkeypatch):
    sent, failed = value("iam_emails_total", result="sent"), value("iam_emails_total", result="failed")
    with django_capture_on_commit_callbacks(execute=True):
        ok(api.call("/auth/register", {"email": "one@example.com", "password": PASSWORD}))
    assert value("iam_emails_total", result="sent") == sent + 1

    def refused(self, *args, **kwargs):
        raise smtplib.SMTPServerDisconnected("gone")

    monkeypatch.setattr(EmailMultiAlternatives, "send", refused)
    with django_capture_on_commit_callbacks(execute=True):
        ok(api.call("/auth/register", {"email": "two@example.com", "password": PASSWORD}))
    assert value("iam_emails_total", result="failed") == failed + 1
    assert value("iam_emails_total", result="sent") == sent + 1


def test_cache_errors_are_counted(api, root, cache_down):
    before = value("iam_cache_errors_total", operation="get_many")
    err(api.call("/auth/login", {"email": "nobody@example.com", "password": "wrong password!"}), 401)
    assert value("iam_cache_errors_total", operation="get_many") > before


def test_the_release_is_a_build_info_gauge(api):
    """`iam_build_info{version="0.4.0"} 1`: the version written in pyproject.toml, its one place."""
    release = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())["project"]["version"]
    assert release == "0.4.0"
    samples = scrape(api)
    assert samples[("iam_build_info", (("version", release),))] == 1.0
    assert [name for name, _ in samples if name == "iam_build_info"] == ["iam_build_info"]
