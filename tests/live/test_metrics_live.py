"""`GET /metrics` against the running service: gunicorn's two workers each count what they
serve, and a scrape, whichever worker answers it, reports the sum (prometheus-client multiprocess mode)."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.live

REQUESTS = 200


def _scrape_headers(live) -> dict:
    return {"Authorization": f"Bearer {live.env['IAM_METRICS_TOKEN']}"}


def refused_health_checks(live) -> float:
    """`POST /health-check` (405): a series no other client of the live service adds to."""
    response = requests.get(f"{live.url}/metrics", headers=_scrape_headers(live), timeout=10)
    assert response.status_code == 200, response.text
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "iam_http_requests_total" and sample.labels == {
                "endpoint": "health-check",
                "status": "405",
            }:
                return sample.value
    return 0.0


def test_a_scrape_sums_the_counts_of_both_gunicorn_workers(live):
    before = refused_health_checks(live)

    # Four clients at once against two worker processes, each connection new: both accept a share of
    # them and neither serves all.
    def health_check(_: int) -> int:
        return requests.post(f"{live.url}/health-check", timeout=10).status_code

    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(health_check, range(REQUESTS)))
    assert statuses == [405] * REQUESTS

    # Each scrape is answered by one worker or the other; every one of them sees the whole count.
    assert [refused_health_checks(live) for _ in range(8)] == [before + REQUESTS] * 8

    # Latency histograms are observed by the web workers only (not the Celery worker beside them).
    histograms = Path(live.env["PROMETHEUS_MULTIPROC_DIR"]).glob("histogram_*.db")
    assert len({path.stem.rsplit("_", 1)[-1] for path in histograms}) >= 2


def test_the_metrics_token_guards_the_live_endpoint(live):
    assert requests.get(f"{live.url}/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer wrong"}
    assert requests.get(f"{live.url}/metrics", headers=wrong, timeout=10).status_code == 401


def test_the_release_is_reported_once_in_multiprocess_mode(live):
    response = requests.get(f"{live.url}/metrics", headers=_scrape_headers(live), timeout=10)
    samples = [
        sample
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == "iam_build_info"
    ]
    assert [(sample.labels, sample.value) for sample in samples] == [({"version": "0.4.0"}, 1.0)]
