"""Slow upstreams hold no worker for long (docs/api.md#waiting-on-the-network), against the Procfile's
`web` shape: 6 loops of one tenant call `sso/verify-domain` for domains whose nameserver never answers (a
loopback UDP socket that reads every query and never replies, named by IAM_DNS_NAMESERVERS) while another
tenant's `clients/validate` is timed. Each verification ends within the 5-second network budget (503) or
is refused at once (429: two of the workspace's requests already wait), however many web processes serve
them, and the other tenant's validate keeps answering."""

import socket
import threading
import time
from collections import Counter

import pytest

from tests.live.api import META, create_workspace, ok, unique, validating_tenant
from tests.sso.stand_ins import OpenIdProvider

LOOPS = 6
SECONDS = 20
BUDGET = 5.0


class SilentNameserver:
    """Reads every query and answers none."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.queries = 0
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        while True:
            try:
                self.sock.recvfrom(4096)
            except OSError:
                return
            self.queries += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def silent():
    nameserver = SilentNameserver()
    yield nameserver
    nameserver.close()


@pytest.fixture(scope="module")
def web(live, silent):
    """A web tier of its own (the Procfile's `web`, 2 workers) whose domain proofs ask the silent server."""
    return live.start_web(env={"IAM_DNS_NAMESERVERS": silent.address})


@pytest.fixture(scope="module")
def idp():
    provider = OpenIdProvider()
    yield provider
    provider.close()


def timed_validations(live, body: dict, web, *, seconds: float) -> list[float]:
    """`clients/validate` one after another for `seconds` (each must authorize): their durations."""
    timings = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        response = live.post("/clients/validate", body, base=web.url)
        timings.append(time.monotonic() - started)
        assert response.status_code == 200 and response.json()["data"]["authorized"] is True, response.text
        time.sleep(0.02)
    return timings


def summary(timings: list[float]) -> str:
    return (
        f"p50 {percentile(timings, 0.5) * 1000:.1f} ms, p99 {percentile(timings, 0.99) * 1000:.1f} ms, "
        f"max {max(timings) * 1000:.1f} ms over {len(timings)} calls"
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def test_verifications_against_a_silent_nameserver_do_not_starve_another_tenant(live, web, silent, idp):
    tenant = live.register()
    token = tenant["access_token"]
    workspace = create_workspace(live, token)["id"]
    domains = [f"{unique('d')}.test" for _ in range(LOOPS)]
    body = {"name": unique("idp"), "issuer": idp.issuer, "client_id": "c", "client_secret": "s",
            "domains": domains, "default_role_ids": [], "tags": [], "meta": META}  # fmt: skip
    connection = ok(live.post("/sso/create", body, token=token, workspace=workspace, base=web.url))
    other = validating_tenant(live)
    alone = timed_validations(live, other, web, seconds=5)

    stop = threading.Event()
    verifications: list[tuple[int, float, str]] = []

    def verify(domain: str) -> None:
        while not stop.is_set():
            started = time.monotonic()
            response = live.post(
                "/sso/verify-domain",
                {"id": connection["id"], "domain": domain},
                token=token,
                workspace=workspace,
                base=web.url,
            )
            message = response.json().get("message", "") if response.status_code != 200 else ""
            verifications.append((response.status_code, time.monotonic() - started, message))
            if response.status_code == 429:
                assert int(response.headers["Retry-After"]) >= 1
                time.sleep(0.2)

    loops = [threading.Thread(target=verify, args=(domain,)) for domain in domains]
    for loop in loops:
        loop.start()
    try:
        time.sleep(1)  # the verifications are under way
        timings = timed_validations(live, other, web, seconds=SECONDS)
    finally:
        stop.set()
        for loop in loops:
            loop.join()

    outcomes = Counter(status for status, _, _ in verifications)
    waited = [seconds for status, seconds, _ in verifications if status == 503]
    print(
        f"\nanother tenant's validate alone: {summary(alone)}; under {LOOPS} verify-domain loops: "
        f"{summary(timings)}; verify-domain {dict(outcomes)}, the longest {max(waited):.2f} s; "
        f"{silent.queries} queries unanswered"
    )
    assert set(outcomes) <= {429, 503}, verifications[:5]
    assert outcomes[503] >= 2 and silent.queries > 0
    assert {message for status, _, message in verifications if status == 503} == {
        "domain verification unavailable"
    }
    # Refused at once: two of the workspace's requests already wait, or the web process would have no
    # thread left for requests that wait on nothing.
    assert {message for status, _, message in verifications if status == 429} <= {
        "too many requests waiting on the network for this workspace",
        "too many requests waiting on the network",
    }
    assert max(waited) < BUDGET + 2, sorted(waited)[-5:]  # the budget, and a wait for a thread
    assert max(seconds for status, seconds, _ in verifications if status == 429) < 1.0
    # At most two of the workspace's requests waited at once: in 20 s of 5-second waits, about 8 in all.
    assert outcomes[503] <= 2 * (SECONDS + 2) / BUDGET + 2, outcomes
    # Never starved: no validate waits for a verification to end (5 s).
    assert max(timings) < 1.0, summary(timings)
