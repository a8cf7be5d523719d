"""The `login` and `totp` parts: password logins per second per core beside argon2id's own ceiling, the
enumeration timing, and logins with TOTP."""

import concurrent.futures
import json
import os
import statistics
import threading
import time
from pathlib import Path

from bench.common import PASSWORD, ROUNDS, SECONDS, TOTP_ACCOUNTS, WORKERS, Api, percentile, rows
from bench.web import load, server_cpu


def login_figures(base: str, api: Api, workdir: Path) -> None:
    body = json.dumps({"email": "operator@bench.example", "password": PASSWORD})
    cores = min(os.cpu_count() or 1, WORKERS)
    # What logins cannot go above: the password check alone, at the configured argon2id parameters, in
    # as many processes at once as the service has workers (they share the cores and memory bandwidth).
    from django.contrib.auth.hashers import get_hasher, make_password

    hasher = get_hasher()
    encoded = make_password(PASSWORD)
    rates, ceilings, verifies, login_cpus, generators = [], [], [], [], []
    # Two floors beside the service's login, same server and middleware (bench/urls.py): the password
    # check alone in a view, and the whole login by hand (raw SQL, no ORM or DRF). Per path: rates per
    # core, and server CPU per request (ms).
    floors = {"/bench/hash": ([], []), "/bench/login-floor": ([], [])}
    with concurrent.futures.ProcessPoolExecutor(WORKERS) as pool:
        list(pool.map(_verify, [encoded] * WORKERS, [PASSWORD] * WORKERS, [2] * WORKERS))  # warm
        for _ in range(ROUNDS):  # alternate, so drifting load on a shared machine hits both alike
            server, generator = server_cpu(base), time.process_time()
            result = load(f"{base}/auth/login", body, workdir, connections=4)
            logins_run = max(result["rps"] * SECONDS, 1)
            login_cpus.append((server_cpu(base) - server) / logins_run * 1000)
            generators.append((time.process_time() - generator) / logins_run * 1000)  # Python threads
            rates.append(result["rps"] / cores)
            for path, (floor_rates, floor_cpus) in floors.items():
                server = server_cpu(base)
                floor = load(f"{base}{path}", body, workdir, connections=4)
                assert not floor["errors"], f"{path} answered {floor['errors']} non-2xx"
                floor_cpus.append((server_cpu(base) - server) / max(floor["rps"] * SECONDS, 1) * 1000)
                floor_rates.append(floor["rps"] / cores)
            timed = list(pool.map(_verify, [encoded] * WORKERS, [PASSWORD] * WORKERS, [20] * WORKERS))
            ceilings.append(20 * WORKERS / max(wall for wall, _ in timed) / cores)
            verifies.append(sum(cpu for _, cpu in timed) / (20 * WORKERS) * 1000)
    logins, per_core = statistics.median(rates), statistics.median(ceilings)
    rounds = ", ".join(f"{rate / ceiling:.2f}" for rate, ceiling in zip(rates, ceilings, strict=True))
    rows.append(
        (
            f"argon2id verify alone (m={hasher.memory_cost} KiB, t={hasher.time_cost}, "
            f"p={hasher.parallelism}), {WORKERS} processes at once",
            f"{WORKERS * 1000 / per_core / cores:.1f} ms each: at most {per_core:.0f} logins per second "
            "per core",
            "-",
        )
    )
    rows.append(
        (
            f"password logins per second per core (argon2id) / the ceiling above (medians of {ROUNDS} "
            "alternating rounds)",
            f"{logins:.0f} ({WORKERS} workers) / {per_core:.0f} = {logins / per_core:.2f} (rounds: {rounds})",
            ">= 0.90",
        )
    )
    for path, label in (
        ("/bench/hash", "the password check alone, in a view"),
        ("/bench/login-floor", "the same login by hand (raw SQL, no ORM or DRF)"),
    ):
        floor_rates, floor_cpus = floors[path]
        floor = statistics.median(floor_rates)
        floor_rounds = ", ".join(
            f"{rate / ceiling:.2f}" for rate, ceiling in zip(floor_rates, ceilings, strict=True)
        )
        rows.append(
            (
                f"floor `{path}`: {label}, per second per core / the ceiling",
                f"{floor:.0f} / {per_core:.0f} = {floor / per_core:.2f} (rounds: {floor_rounds}; server "
                f"CPU {statistics.median(floor_cpus):.1f} ms each)",
                "-",
            )
        )
    # The same ratio in CPU time, which the load of other processes moves less: the server's CPU per login
    # (its workers' only: PostgreSQL's and Redis's share is not in it) against one verify's.
    login_cpu, verify_cpu = statistics.median(login_cpus), statistics.median(verifies)
    rows.append(
        (
            "argon2id CPU per verify / server CPU per login",
            f"{verify_cpu:.1f} / {login_cpu:.1f} ms = {verify_cpu / login_cpu:.2f} (the load generator's: "
            f"{statistics.median(generators):.1f} ms per login)",
            "-",
        )
    )
    unknown, wrong = [], []
    api.connection.close()  # idle through the argon2 runs above, past the server's keep-alive: a new one
    for index in range(20):
        _, elapsed = _timed_login(api, f"nobody{index}@bench.example", "wrong-password-1")
        unknown.append(elapsed)
        _, elapsed = _timed_login(api, "operator@bench.example", "wrong-password-1")
        wrong.append(elapsed)
    ratio = statistics.median(unknown) / statistics.median(wrong)
    rows.append(
        (
            "login: unknown e-mail / wrong password (median latency)",
            f"{statistics.median(unknown):.1f} / {statistics.median(wrong):.1f} ms = {ratio:.2f}",
            "0.95 .. 1.05",
        )
    )


def totp_accounts(workspace) -> list[tuple[str, str]]:
    """TOTP_ACCOUNTS accounts with a password and an active TOTP: (e-mail, base32 secret). One hash made
    once serves them all (its cost is the same), and one login each: a code works once per account."""
    import pyotp
    from django.contrib.auth.hashers import make_password
    from django.utils import timezone

    from accounts.models import Account
    from authn.models import Credential, Totp
    from iam.platform import crypto

    encoded = make_password(PASSWORD)
    accounts = Account.objects.bulk_create(
        Account(email=f"totp{index}@bench.example", name=f"Totp {index}", verified=True, password=encoded)
        for index in range(TOTP_ACCOUNTS)
    )
    Credential.objects.bulk_create(
        Credential(
            account=account,
            workspace=workspace,
            kind="password",
            provider="local",
            status="active",
            email=account.email,
        )
        for account in accounts
    )
    secrets_ = [pyotp.random_base32() for _ in accounts]
    Totp.objects.bulk_create(
        Totp(account=account, secret_encrypted=crypto.encrypt(secret), confirmed_at=timezone.now())
        for account, secret in zip(accounts, secrets_, strict=True)
    )
    return [(account.email, secret) for account, secret in zip(accounts, secrets_, strict=True)]


def totp_login_figure(base: str, accounts: list[tuple[str, str]]) -> None:
    """Logins with TOTP from 4 connections, as the password login rate is measured: each is the password
    step (`auth/login`, answering an `mfa_token`) and the code step (`auth/mfa/verify`). The code step
    verifies no password (tests/authn/test_totp_cost.py), so the rate should stay close to the
    password login's."""
    import pyotp

    pending = list(accounts)
    lock = threading.Lock()
    latencies: list[float] = []

    def work() -> None:
        api = Api(base)
        while True:
            with lock:
                if not pending:
                    return
                email, secret = pending.pop()
            started = time.perf_counter()
            answer, _ = api.post("/auth/login", {"email": email, "password": PASSWORD})
            session, _ = api.post(
                "/auth/mfa/verify", {"mfa_token": answer["mfa_token"], "code": pyotp.TOTP(secret).now()}
            )
            assert "access_token" in session, session
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for done in [pool.submit(work) for _ in range(4)]:
            done.result()
    elapsed = time.perf_counter() - started
    cores = os.cpu_count() or 1
    rows.append(
        (
            f"logins with TOTP per second per core (password + code step, {len(accounts)} accounts)",
            f"{len(latencies) / elapsed / min(cores, WORKERS):.0f} ({WORKERS} workers; "
            f"p50 {percentile(latencies, 0.5):.0f} ms for both steps)",
            "close to the password login rate (one argon2id each)",
        )
    )


def _verify(encoded: str, password: str, count: int) -> tuple[float, float]:
    """Seconds, wall and CPU, for `count` argon2id checks of `password` (in a process of the bench's
    pool)."""
    from django.contrib.auth.hashers import check_password

    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        check_password(password, encoded)
    return time.perf_counter() - started, time.process_time() - cpu


def _timed_login(api: Api, email: str, password: str) -> tuple[int, float]:
    started = time.perf_counter()
    api.connection.request(
        "POST",
        "/auth/login",
        json.dumps({"email": email, "password": password}),
        {"Content-Type": "application/json"},
    )
    response = api.connection.getresponse()
    response.read()
    return response.status, (time.perf_counter() - started) * 1000
