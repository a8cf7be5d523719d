"""`make bench`'s token endpoint figures (bench/run.py calls `token_figures`): `POST /oauth2/token` code
exchanges, refresh grants and client-credentials grants per second per core, from 4 keep-alive
connections, each request as an application sends it (a `web` application, HTTP Basic).

- Code exchanges: each code works once and lives 60 seconds, so BENCH_TOKEN_CODES (600) codes (and 16
  for a warm-up that is not counted) are made first, straight into the database as the authorization
  endpoint makes them (one browser session, PKCE S256), then exchanged as fast as the service answers:
  the code spent, the application session and its refresh token written, two HS256 tokens and an RS256
  ID token signed.
- Refresh grants: 4 application sessions, each refreshed in a chain BENCH_TOKEN_REFRESHES (150) times
  (a refresh token works once: each answer's is the next request's), rotation and reuse detection
  included.
- Client-credentials grants: BENCH_TOKEN_MACHINE_GRANTS (600) from a `web` application with that grant,
  acting as a service account of the workspace (docs/oidc.md#client-credentials): an access token each,
  no refresh token, no ID token.

Printed beside Keycloak's published figure, 120 client-credentials grants per second per vCPU
(Keycloak's "Concepts for sizing CPU and memory resources", which budgets one vCPU per 120 of them)."""

import base64
import concurrent.futures
import contextlib
import functools
import hashlib
import http.client
import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

CODES = int(os.environ.get("BENCH_TOKEN_CODES", "600"))
REFRESHES = int(os.environ.get("BENCH_TOKEN_REFRESHES", "150"))
MACHINE_GRANTS = int(os.environ.get("BENCH_TOKEN_MACHINE_GRANTS", "600"))
# Code exchanges before the clock starts: each worker's first requests load the URL configuration,
# Authlib's grants and the signing keys, which no later grant pays.
WARM_UP = 16
CONNECTIONS = 4
KEYCLOAK = "Keycloak: 120 client-credentials grants per second per vCPU"
REDIRECT_URI = "https://bench.example/callback"


def _application(workspace, **fields):
    from oidc import services

    application, secret = services.create_application(
        workspace, actor=None, type="web", tags=[], meta={"schema_version": "1"}, **fields
    )
    return application, secret


def _basic(application, secret: str) -> str:
    return base64.b64encode(f"{application.client_id}:{secret}".encode()).decode()


def _codes(application, browser, workspace, challenge: str, count: int) -> list[str]:
    from oidc.sessions import SignIn, new_code, save_code

    codes = []
    for _ in range(count):
        code = new_code()
        save_code(
            code,
            application=application,
            sign_in=SignIn(browser_session=browser, workspace_id=workspace.pk),
            redirect_uri=REDIRECT_URI,
            scope="openid email profile offline_access",
            nonce="bench",
            code_challenge=challenge,
        )
        codes.append(code)
    return codes


def _run(base: str, basic: str, bodies, *, chains: int) -> tuple[int, float]:
    """Posts each body `bodies(chain, answer)` gives (None: that chain is done) from CONNECTIONS
    keep-alive connections; answers (requests done, seconds)."""
    parts = urlsplit(base)
    done = [0]
    lock = threading.Lock()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Authorization": f"Basic {basic}"}

    def work(chain: int) -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        answer = None
        while (body := bodies(chain, answer)) is not None:
            connection.request("POST", "/oauth2/token", urlencode(body), headers)
            response = connection.getresponse()
            answer = json.loads(response.read())
            assert response.status == 200, answer
            with lock:
                done[0] += 1

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CONNECTIONS) as pool:
        for future in [pool.submit(work, chain) for chain in range(chains)]:
            future.result()
    return done[0], time.perf_counter() - started


def _database_cpu() -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend serving the bench database but this process's
    own (PostgreSQL runs on this machine: its processes' /proc entries)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [row[0] for row in cursor.fetchall()]
    used = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return used


def _measured(
    name: str, run: Callable[[], tuple[int, float]], cpu: Callable[[], float], cores: int, workers: int
) -> tuple:
    """The rate per core, and the CPU time per grant of the server and of PostgreSQL's backends serving
    it (steady on a busy machine, where the rate is not: other processes take the cores), as the rate
    one core could give at that cost. A backend that ended during the run (`DB_CONN_MAX_AGE`) is left
    out."""
    server_before, database_before = cpu(), _database_cpu()
    count, elapsed = run()
    server_ms = (cpu() - server_before) / count * 1000
    database_after = _database_cpu()
    used = sum(seconds - database_before.get(pid, 0.0) for pid, seconds in database_after.items())
    database_ms = used / count * 1000
    return (
        f"token endpoint: {name} per second per core ({count})",
        f"{count / elapsed / cores:.0f} ({workers} workers); server CPU {server_ms:.1f} ms each: "
        f"{1000 / server_ms:.0f} per core-second; with PostgreSQL's {database_ms:.1f} ms: "
        f"{1000 / (server_ms + database_ms):.0f}",
        KEYCLOAK,
    )


def token_figures(
    base: str, rows: list, *, workspace, member, workers: int, cpu: Callable[[], float]
) -> None:
    """`cpu`: the server's CPU seconds used so far (its master and workers)."""
    from authn.sessions import issue_application_session, open_browser_session
    from oidc.sessions import application_claims

    application, secret = _application(workspace, name="bench-app", redirect_uris=[REDIRECT_URI])
    basic = _basic(application, secret)
    browser = open_browser_session(member, amr=["pwd"])
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    cores = min(os.cpu_count() or 1, workers)

    pending = _codes(application, browser, workspace, challenge, CODES + WARM_UP)
    lock = threading.Lock()
    left_after = [CODES]  # the warm-up stops when CODES are left

    def exchange(chain: int, answer) -> dict | None:
        with lock:
            if len(pending) <= left_after[0]:
                return None
            code = pending.pop()
        return {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
        }

    _run(base, basic, exchange, chains=CONNECTIONS)
    left_after[0] = 0
    run = functools.partial(_run, base, basic, exchange, chains=CONNECTIONS)
    rows.append(_measured("code exchanges (ID token RS256)", run, cpu, cores, workers))

    claims = application_claims(application, scope="openid email profile offline_access", workspace_id=None)
    started = [
        issue_application_session(browser, application_id=application.pk, claims=claims, with_refresh=True)
        for _ in range(CONNECTIONS)
    ]
    chains = [pair.tokens for _, pair in started]
    left = [REFRESHES] * CONNECTIONS

    def refresh(chain: int, answer) -> dict | None:
        if left[chain] == 0:
            return None
        left[chain] -= 1
        token = (answer or chains[chain])["refresh_token"]
        return {"grant_type": "refresh_token", "refresh_token": token}

    run = functools.partial(_run, base, basic, refresh, chains=CONNECTIONS)
    rows.append(_measured("refresh grants (rotated, ID token)", run, cpu, cores, workers))

    from rbac.services.service_accounts import create_service_account

    service_account = create_service_account(
        workspace, name="bench-machine", roles=[], tags=[], meta={"schema_version": "1"}, actor=None
    )
    machine, machine_secret = _application(
        workspace,
        name="bench-machine",
        redirect_uris=[],
        grant_types=["client_credentials"],
        service_account_id=service_account.pk,
    )
    left = [MACHINE_GRANTS // CONNECTIONS] * CONNECTIONS

    def machine_grant(chain: int, answer) -> dict | None:
        if left[chain] == 0:
            return None
        left[chain] -= 1
        return {"grant_type": "client_credentials"}

    run = functools.partial(_run, base, _basic(machine, machine_secret), machine_grant, chains=CONNECTIONS)
    rows.append(_measured("client-credentials grants", run, cpu, cores, workers))
