"""Prometheus metrics, through prometheus-client. With `PROMETHEUS_MULTIPROC_DIR` set (see
iam/server/gunicorn.conf.py) every process writes its figures to files there and `GET /metrics` adds up those
of every gunicorn worker (and of a Celery worker sharing the directory); without it, the figures of this
process. Labels take bounded values only: an endpoint is its route pattern, never the raw path."""

import hmac
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from iam.http.errors import AUTHENTICATION_REQUIRED, error_response
from iam.platform.registry import Registry
from iam.version import VERSION

logger = logging.getLogger(__name__)

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # A worker started before the web server (which creates it) must not fail its first count.
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

REQUESTS = Counter("iam_http_requests_total", "HTTP requests by endpoint and status.", ["endpoint", "status"])
LATENCY = Histogram(
    "iam_http_request_duration_seconds",
    "Time to answer an HTTP request, by endpoint.",
    ["endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
LOGINS = Counter(
    "iam_logins_total", "Password logins by outcome (ok, invalid, throttled, disabled).", ["outcome"]
)
VALIDATIONS = Counter(
    "iam_token_validations_total", "clients/validate answers by reason (ok when authorized).", ["reason"]
)
PUSH_ATTEMPTS = Counter(
    "iam_push_delivery_attempts_total", "Push delivery attempts by result (delivered, failed).", ["result"]
)
EMAILS = Counter("iam_emails_total", "E-mails handed to the backend, by result (sent, failed).", ["result"])
CACHE_ERRORS = Counter("iam_cache_errors_total", "Cache calls that failed, by operation.", ["operation"])


# Where work waits for a worker, by topic: the outbox's messages (below) and what the apps register with
# `@metrics.backlog(topic)` (clients/models.py: push deliveries). Each answers the pending rows' count and
# the oldest one's creation time.
Backlog = Callable[[], dict]
_backlogs: Registry[Backlog] = Registry()
backlog = _backlogs.register


def _outbox_backlog() -> list[dict]:
    from iam.models import OutboxMessage

    return list(
        OutboxMessage.objects.filter(status=OutboxMessage.Status.PENDING)
        .values("topic")
        .annotate(count=Count("pk"), first=Min("created_at"))
        .order_by("topic")
    )


class OutboxCollector(Collector):
    """Computed at scrape time from the database: the backlog is a fact about rows, not about a process.
    One pair of gauges for all work waiting on a worker, so one alert covers e-mails and pushes alike."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending = GaugeMetricFamily(
            "iam_outbox_pending_messages",
            "Work waiting for a worker (outbox messages, push deliveries), by topic.",
            labels=["topic"],
        )
        oldest = GaugeMetricFamily(
            "iam_outbox_oldest_pending_age_seconds",
            "Age of the oldest work waiting for a worker, by topic.",
            labels=["topic"],
        )
        try:
            rows = _outbox_backlog() + [
                {"topic": topic, **func()} for topic, func in sorted(_backlogs.items())
            ]
        except Exception:
            logger.warning("metrics: backlog figures unavailable", exc_info=True)
            return
        now = timezone.now()
        for row in rows:
            if not row["count"]:
                continue
            pending.add_metric([row["topic"]], row["count"])
            oldest.add_metric([row["topic"]], max(0.0, (now - row["first"]).total_seconds()))
        yield pending
        yield oldest


class BuildInfoCollector(Collector):
    """`iam_build_info{version="0.4.0"} 1`: which release answers, as Prometheus' own `*_build_info`
    gauges say it, so a dashboard can show an upgrade rolling through (`count by (version)`)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily("iam_build_info", "The release running (always 1).", labels=["version"])
        info.add_metric([VERSION], 1)
        yield info


class _ThisProcess(Collector):
    def collect(self):
        return REGISTRY.collect()


def registry() -> CollectorRegistry:
    """What a scrape reads: every process's files in multiprocess mode, else this process's figures."""
    scraped = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(scraped)
    else:
        scraped.register(_ThisProcess())
    scraped.register(OutboxCollector())
    scraped.register(BuildInfoCollector())
    return scraped


def _authorized(request: HttpRequest) -> bool:
    expected = settings.IAM_METRICS_TOKEN
    if not expected:
        return True
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected.encode())


@csrf_exempt  # no cookie session to protect: without it, a POST got CSRF's 403 instead of 405
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _authorized(request):
        response = error_response(401, AUTHENTICATION_REQUIRED)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    # As prometheus-client's own exporter: OpenMetrics when the scraper asks for it, else the text format.
    encode, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    return HttpResponse(encode(registry()), content_type=content_type)
