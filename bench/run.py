"""`make bench`: the one benchmark of the service, printed as one table beside its goals.

It makes a database of its own beside DATABASE_URL's (`<name>_bench`, PostgreSQL only), migrates it, seeds
1M accounts and one workspace with 1M memberships (bench/seed.sql, generate_series), serves the project
with the Procfile's `web` command (2 workers, no access log; BENCH_WEB replaces it) and measures, in the
same run:

- `clients/validate` against a bare Django view behind the same middleware (the floor), with wrk (or a
  Python load generator when wrk is missing, said in the output), under the Procfile's `web` command and
  under plain sync gunicorn beside it (what reading requests whole costs), and one at a time beside 50
  connections that trickle their bodies;
- password logins per second per core beside argon2id's own ceiling and two floors (the password check
  alone in a view, and the same login by hand in raw SQL: bench/urls.py), and unknown e-mail against
  wrong password (enumeration timing);
- logins with TOTP per second per core (the password step and the code step, one account each, since a
  code works once);
- the token endpoint: code exchanges and refresh grants per second per core (bench/token_endpoint.py);
- machine identities: an API key's Bearer call beside a session's on `projects/list`, and a root client's
  `clients/validate` naming the workspace beside the workspace's own client's (bench/machines.py);
- the list cases (p50/p95 over sequential keep-alive requests), each with the `EXPLAIN ANALYZE` summary
  of its queries;
- the noisy neighbour: one tenant's heaviest allowed lists (limit 1000 over records at their size
  limits) from 3 threads at full speed, while another tenant's `projects/list` and `clients/validate` are
  timed (p50/p95);
- push: a change acknowledged to its first delivery at a local receiver (one change every 0.3 s), and
  deliveries per second for a burst of changes to 5 clients, with 2 Celery worker processes (paused while
  the burst is committed, so the figure is theirs and not the committing loop's);
- push recovery: one change of BENCH_BURST events to the 5 clients committed at once, delivered without a
  fault, then with the worker killed (-9) and restarted three times (beat's sweep runs beside it), with
  how long each kill stopped new deliveries.

The parts live in bench/web.py (validate), bench/logins.py (login, totp), bench/token_endpoint.py (token),
bench/machines.py (machines), bench/lists.py (lists, neighbour) and bench/push.py (push, push-recovery);
bench/common.py holds the knobs and the table. Run it as `python -m bench.run` (`make bench`).

The bench database is dropped at the end (BENCH_KEEP=1 keeps it). Knobs: BENCH_SECONDS (5), BENCH_ROUNDS
(3: ping and validate alternate, the median counts), BENCH_CONNECTIONS (8), BENCH_BURST (2000),
BENCH_LIST_REQUESTS (40), BENCH_ROWS (1000000), BENCH_PARTS
(validate,login,totp,token,machines,lists,neighbour,push,push-recovery), BENCH_TOTP_ACCOUNTS (200),
BENCH_WEB (a web command to measure instead of the Procfile's). Needs REDIS_URL
for the push figures (Celery's broker and the shared cache).
"""

import compileall
import json
import multiprocessing
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    BIN,
    CONNECTIONS,
    PARTS,
    PASSWORD,
    PUSH_CLIENTS,
    ROOT,
    ROUNDS,
    SECONDS,
    SEED_ROWS,
    WORKERS,
    Api,
    admin_sql,
    bench_database_url,
    database_name,
    free_port,
    notes,
    rows,
)
from bench.lists import explain, list_figures, neighbour_figures
from bench.logins import login_figures, totp_accounts, totp_login_figure
from bench.push import Workers, push_figures, receive_pushes
from bench.web import SYNC_COMMAND, serve, server_cpu, slow_clients_figure, validate_figures, web_command


def compile_bytecode() -> None:
    """The service's modules compiled before any process starts, as a built image holds them
    (docs/operations.md#deploying-migrations-and-static-files): without, every web, worker and beat process
    compiles them again, at each start where PYTHONDONTWRITEBYTECODE is set (as on these machines)."""
    for package in sorted(path.parent for path in ROOT.glob("*/__init__.py")):
        compileall.compile_dir(package, quiet=1)


def main() -> None:
    url = bench_database_url()
    name = database_name(url)
    workdir = Path(tempfile.mkdtemp(prefix="iam-bench-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DATABASE_URL": url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", secrets.token_urlsafe(50)),
        # DEBUG off refuses to start without its own keys (docs/operations.md#required-settings): the bench
        # makes throw-away ones.
        "IAM_JWT_SIGNING_KEY": os.environ.get("IAM_JWT_SIGNING_KEY", secrets.token_urlsafe(50)),
        "DEBUG": "0",
        "PYTHONPATH": str(ROOT),
        "PYTHONWARNINGS": "ignore:No directory at",  # whitenoise: no collectstatic for a benchmark
        "IAM_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver is on loopback
        "IAM_LOGIN_FAILURES_PER_EMAIL": "100000",  # the enumeration figure makes failures on purpose
        "IAM_LOGIN_FAILURES_PER_IP": "100000",
        "IAM_CACHE_PREFIX": f"bench-{secrets.token_hex(4)}",
        "LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    compile_bytecode()
    processes: list[subprocess.Popen] = []
    admin_sql(url, f'DROP DATABASE IF EXISTS "{name}"')
    admin_sql(url, f'CREATE DATABASE "{name}"')
    try:
        _bench(env, workdir, processes)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(workdir, ignore_errors=True)
        if os.environ.get("REDIS_URL"):
            _clean_redis(env["IAM_CACHE_PREFIX"])
        if os.environ.get("BENCH_KEEP") != "1":
            from django.db import connections

            connections.close_all()
            admin_sql(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _clean_redis(prefix: str) -> None:
    """Drops the bench's queue (a burst it stopped waiting for) and its cache entries."""
    import redis
    from django.conf import settings

    try:
        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        client.delete(settings.CELERY_TASK_DEFAULT_QUEUE)
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
    except Exception as exc:  # report, do not hide the table
        print(f"could not clean the bench's Redis keys: {exc}")


def _bench(env: dict, workdir: Path, processes: list) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from accounts.models import Account
    from authn.models import Credential
    from authn.sessions import issue_session
    from clients.services import create_client
    from iam.platform import counts
    from rbac.models import Membership, Permission, Role
    from tenancy.models import Workspace

    call_command("migrate", "--noinput", verbosity=0)

    # Seed
    workspace = Workspace.objects.create(name="Big", slug="big", config={"schema_version": "1"})
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(
            (ROOT / "bench" / "seed.sql")
            .read_text()
            .replace("{workspace}", str(workspace.pk))
            .replace("1000000", str(SEED_ROWS))
        )
        # The load ran with the triggers off (seed.sql): the exact row counts are made once, after it.
        for table, counted in counts.COUNTED.items():
            cursor.execute(counts.recount_sql(table, counted))
    seeded = time.monotonic() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE accounts_account")  # the visibility map lets counts skip the heap
        cursor.execute("VACUUM ANALYZE rbac_membership")
        cursor.execute("VACUUM ANALYZE iam_row_count")
        # The seed left ~1 GB of dirty pages: write them back now rather than in a checkpoint that would
        # land in the middle of the measurements (it showed as single 100-200 ms requests).
        cursor.execute("CHECKPOINT")
    vacuumed = time.monotonic() - started - seeded
    rows.append(
        (
            f"seed: {SEED_ROWS:,} accounts + {SEED_ROWS:,} memberships (generate_series)",
            f"{seeded:.0f} s (+ vacuum {vacuumed:.0f} s)",
            "well under 120 s",
        )
    )

    # The small world the figures use: an operator, a workspace with a client, a member and push clients.
    operator = Account.objects.create(
        email="operator@bench.example", name="Operator", verified=True, is_superuser=True
    )
    operator.set_password(PASSWORD)
    operator.save()
    Credential.objects.create(
        account=operator,
        workspace=workspace,
        kind="password",
        provider="local",
        status="active",
        email=operator.email,
    )
    token = issue_session(operator, amr=["pwd"])["access_token"]
    member = Account.objects.create(email="member@bench.example", name="Member", verified=True)
    permission = Permission.objects.create(workspace=workspace, name="projects:*")
    role = Role.objects.create(workspace=workspace, name="editor")
    role.permissions.add(permission)
    Membership.objects.create(
        account=member, workspace=workspace, scope="workspace", status="active"
    ).roles.add(role)
    client, secret = create_client(
        workspace, name="bench", tags=[], meta={"schema_version": "1"}, actor=operator
    )
    validate_body = json.dumps(
        {
            "client_id": str(client.pk),
            "client_secret": secret,
            "token": issue_session(member, amr=["pwd"])["access_token"],
            "permission": "projects:update",
        }
    )

    receiver_port = free_port()
    arrivals = multiprocessing.Queue()
    ready = multiprocessing.Event()
    receiver = multiprocessing.Process(
        target=receive_pushes, args=(receiver_port, arrivals, ready), daemon=True
    )
    receiver.start()
    ready.wait(10)
    push_space = Workspace.objects.create(name="Push", slug="push", config={"schema_version": "1"})
    for index in range(PUSH_CLIENTS):
        create_client(
            push_space,
            name=f"push-{index}",
            endpoint=f"http://127.0.0.1:{receiver_port}/hook/{index}",
            tags=[],
            meta={"schema_version": "1"},
            actor=operator,
        )
    pushed = Membership.objects.create(
        account=member, workspace=push_space, scope="workspace", status="active"
    )

    base = serve(web_command(), env, processes)
    api = Api(base)
    answer, _ = api.post("/clients/validate", json.loads(validate_body))
    assert answer["authorized"] and answer["allowed"], answer

    if "validate" in PARTS:
        # Plain sync gunicorn beside the Procfile's shape: what reading requests whole costs.
        sync_base = serve(SYNC_COMMAND, env, processes)
        validate_figures(base, sync_base, validate_body, workdir)
        slow_clients_figure(base, validate_body)
    if "login" in PARTS:
        login_figures(base, api, workdir)
    if "totp" in PARTS:
        totp_login_figure(base, totp_accounts(workspace))
    if "token" in PARTS:  # bench/token_endpoint.py: /oauth2/token beside Keycloak's published figure
        from bench.token_endpoint import token_figures

        token_figures(
            base, rows, workspace=workspace, member=member, workers=WORKERS, cpu=lambda: server_cpu(base)
        )
    if "machines" in PARTS:
        from bench.machines import machine_figures

        machine_figures(
            base, workspace=workspace, role=role, member=member, validate_body=validate_body, workdir=workdir
        )
    if "lists" in PARTS:
        explain(token, workspace, list_figures(api, token, workspace))
    if "neighbour" in PARTS:
        neighbour_figures(base, token, workspace, validate_body)
    if not PARTS & {"push", "push-recovery"}:
        pass
    elif os.environ.get("REDIS_URL"):
        celery = [str(BIN / "celery"), "-A", "iam"]
        quiet = ["--loglevel", "WARNING"]
        # beat: its push sweep hands over what no task took (the recovery figure's killed worker)
        beat = [*celery, "beat", *quiet, "--schedule", str(workdir / "beat-schedule")]
        processes.append(subprocess.Popen(beat, cwd=ROOT, env=env))
        worker = [  # the Procfile's `worker`, with 2 pool processes
            str(BIN / "python"),
            "-m",
            "iam.worker",
            "-c",
            "2",
            *quiet,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        push_figures(api, token, push_space, pushed, arrivals, Workers(worker, env, processes), receiver.pid)
    else:
        notes.append("push figures skipped: REDIS_URL is not set (Celery needs a broker)")
    receiver.terminate()
    _print(env)


def _print(env: dict) -> None:
    load_average = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    generator = "wrk" if shutil.which("wrk") else "Python threads (wrk not found: ratios are lower bounds)"
    print(
        f"\nmachine: {os.cpu_count()} cores, load average before printing {load_average}; "
        f"`{' '.join(web_command())}`, "
        f"{CONNECTIONS} connections, {ROUNDS}x{SECONDS}s rounds, load by {generator}; PostgreSQL, "
        f"cache {'redis' if env.get('REDIS_URL') else 'locmem'}\n"
    )
    width = max(len(row[0]) for row in rows)
    measured = max(len(row[1]) for row in rows)
    print(f"| {'figure':{width}} | {'measured':{measured}} | goal |")
    print(f"|{'-' * (width + 2)}|{'-' * (measured + 2)}|---|")
    for figure, value, goal in rows:
        print(f"| {figure:{width}} | {value:{measured}} | {goal} |")
    print()
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
